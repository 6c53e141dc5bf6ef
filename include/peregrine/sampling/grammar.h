// Context-free grammars for constrained decoding, written in GBNF (llama.cpp's grammar format,
// grammars/README.md of llama.cpp): rules `name ::= alternatives`, string literals "..." with
// \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes, character classes [a-z0-9_] and [^"\\], `.`
// (any character), rule references, groups ( ... ), repetition *, +, ?, {m}, {m,}, {m,n},
// comments from # to the end of the line; `root` is the start rule.
//
// The parsed form is a flat array of elements (one per character class or rule reference, each
// alternative ended by an end marker), the layout a pushdown matcher (grammar_matcher.h) walks
// with stacks of element indices. Repetitions become generated right-recursive rules (x* is
// R ::= x R | ε), which the matcher runs as tail calls, so its stacks do not grow with them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// A set of Unicode code points: inclusive ranges, optionally negated ([^...]).
struct CharSet {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  bool negated = false;
  bool contains(std::uint32_t cp) const;
  /// Whether some code point in [lo, hi] is in the set (a partial UTF-8 sequence's range).
  bool intersects(std::uint32_t lo, std::uint32_t hi) const;
};

/// One element of an alternative.
struct GrammarElement {
  enum class Kind : std::uint8_t { kEnd, kChars, kRule };
  Kind kind = Kind::kEnd;
  std::uint32_t value = 0;  // kChars: index into Grammar::char_sets; kRule: rule id
};

/// A parsed grammar. Immutable once parsed; shared by every request that uses it.
class Grammar {
 public:
  /// Parses GBNF text. Errors (kInvalidArgument, naming the line and column, or the rule): a
  /// syntax error, an undefined rule, no `root` rule, a rule defined twice, an empty character
  /// class range (z-a), a repetition bound above 10000 or min > max, left recursion (a rule that
  /// can reach itself without consuming a character: its matcher would never stop expanding),
  /// and past the limits that keep a hostile grammar small: groups nested over 100 deep, over
  /// 2^20 elements once repetitions are expanded, over 20000 rules.
  static Expected<std::shared_ptr<const Grammar>> parse(std::string_view gbnf);

  const std::vector<GrammarElement>& elements() const { return elements_; }
  const std::vector<CharSet>& char_sets() const { return char_sets_; }
  /// Element index of the first element of each alternative of `rule`.
  const std::vector<std::uint32_t>& alternatives(std::uint32_t rule) const { return rules_[rule]; }
  std::uint32_t root() const { return root_; }
  std::size_t n_rules() const { return rules_.size(); }

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElement> elements_;
  std::vector<CharSet> char_sets_;
  std::vector<std::vector<std::uint32_t>> rules_;
  std::uint32_t root_ = 0;
};

/// GBNF of any JSON value with an object at the top (OpenAI's response_format
/// {"type": "json_object"}): RFC 8259's grammar, whitespace limited to one optional run of
/// spaces / newlines between tokens (as llama.cpp's json.gbnf, so a model cannot pad forever).
std::string_view json_object_gbnf();

}  // namespace peregrine

// Grammar-constrained decoding: which tokens may come next under a grammar (grammar.h), and
// the grammar's state as tokens are accepted.
//
// The state is a set of pushdown stacks (llama.cpp's llama_grammar_advance_stack scheme): each
// stack holds element indices, its top the character class to match next, below it where to
// continue when the rule on top ends; an empty stack means the text so far is a whole sentence.
// A character keeps the stacks whose top class contains it, each advanced and re-expanded
// through rule references. A token's bytes are decoded as UTF-8 across token boundaries (a
// token may end inside a character: the partial character must still fit some class), and
// only well-formed UTF-8 is taken.
//
// Masking walks the vocabulary's byte trie (token_trie.h) from the current state, dropping a
// subtree as soon as no stack survives its prefix, so a shared prefix is matched once; masks
// are cached per state (a JSON string's characters, say, all leave the same state), so a state
// seen before costs one copy of the mask.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/sampling/grammar.h"
#include "peregrine/sampling/token_trie.h"

namespace peregrine {

/// A grammar and the vocabulary it constrains: what a request carries.
struct TokenGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTrie> vocabulary;
  explicit operator bool() const { return grammar != nullptr && vocabulary != nullptr; }
};

class GrammarMatcher {
 public:
  /// At the grammar's start. `eos_id` (-1: none) is the token that ends the text, allowed only
  /// when the text is a whole sentence.
  GrammarMatcher(TokenGrammar grammar, std::int32_t eos_id);

  /// Sets logits [vocab] of every token the grammar does not allow next to -inf: tokens whose
  /// bytes cannot continue the text, control tokens, and eos_id unless the text is complete.
  /// Returns how many tokens stay allowed (0: the grammar is stuck, e.g. a sentence that no
  /// token of this vocabulary can continue).
  std::int64_t mask(std::span<float> logits);

  /// Advances by token `id`. Errors: kInvalidArgument when the grammar does not allow it (the
  /// state is then unchanged).
  Status accept(std::int32_t id);

  /// Whether the text so far is a whole sentence of the grammar.
  bool can_end() const;
  /// Whether nothing may follow: every stack is empty (eos, or the request's end, comes next).
  bool must_end() const;

 private:
  using Stack = std::vector<std::uint32_t>;
  struct State {
    std::vector<Stack> stacks;  // sorted, unique
    std::uint32_t partial = 0;  // bits of a UTF-8 character begun but not finished
    std::uint32_t pending = 0;  // its continuation bytes still to come (0: none)
    std::uint32_t min = 0;      // the least code point its length may encode (no overlong forms)
  };

  void expand(Stack stack, std::vector<Stack>& out) const;
  bool advance_byte(const State& from, std::uint8_t byte, State& to) const;
  std::vector<Stack> advance_char(const std::vector<Stack>& stacks, std::uint32_t cp) const;
  void walk(std::uint32_t node, const State& state, std::vector<std::uint8_t>& allowed) const;
  static std::string key(const State& state);

  TokenGrammar g_;
  std::int32_t eos_id_;
  State state_;
  // Masks of states seen before (allowed[id], without eos), least recently used evicted first.
  std::list<std::pair<std::string, std::vector<std::uint8_t>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> cache_;
};

}  // namespace peregrine

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
// Masking uses XGrammar's split of the vocabulary per grammar position (Dong et al. 2024,
// "XGrammar: Flexible and Efficient Structured Generation Engine for Large Language Models"):
// for each character class a stack can have on top, the tokens it takes whatever lies below it
// on the stack (context-independent: e.g. any token without a quote inside a JSON string), and
// the few whose fate depends on that (they leave the position's rule mid-token). Both sets come
// from one walk of the vocabulary's byte trie (token_trie.h) on the position's first use, kept
// for every request of the grammar (TokenMaskCache); a state's mask is then the union of its
// stacks' accepted sets plus its uncertain tokens checked one by one. Masks are also cached per
// state, so a state seen before costs one pass over the logits.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/sampling/grammar.h"
#include "peregrine/sampling/token_trie.h"

namespace peregrine {

/// Per stack top (its last kSuffix elements: the character class and the rules it returns to,
/// which hold the loops of repetitions), the tokens a stack ending so takes whatever lies below
/// (`accepted`, a bitset over token ids) and those that run past those elements mid-token
/// (`uncertain`): computed on first use, under a lock, then shared. A stack no longer than
/// kSuffix is its own entry, with nothing uncertain.
class TokenMaskCache {
 public:
  static constexpr std::size_t kSuffix = 3;
  struct PositionMasks {
    std::vector<std::uint64_t> accepted;  // bit id % 64 of word id / 64
    std::vector<std::int32_t> uncertain;  // ids, none of them in `accepted`
  };
  TokenMaskCache(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);
  /// The masks of the stack top of `stack` (non-empty, a kChars element on top). Thread-safe.
  const PositionMasks& at(std::span<const std::uint32_t> stack);

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<PositionMasks>> masks_;
};

/// A grammar and the vocabulary it constrains: what a request carries. Requests that share one
/// TokenGrammar share its position masks.
struct TokenGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTrie> vocabulary;
  std::shared_ptr<TokenMaskCache> masks;
  /// The TokenGrammar of `grammar` over `vocabulary`, with an empty mask cache.
  static TokenGrammar of(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);
  explicit operator bool() const { return grammar != nullptr && vocabulary != nullptr && masks != nullptr; }
};

/// Where a grammar stands: its stacks (sorted, unique) and a UTF-8 character begun but not
/// finished.
struct GrammarState {
  std::vector<std::vector<std::uint32_t>> stacks;
  std::uint32_t partial = 0;  // the character's bits so far
  std::uint32_t pending = 0;  // its continuation bytes still to come (0: none)
  std::uint32_t min = 0;      // the least code point its length may encode (no overlong forms)
};

class GrammarMatcher {
 public:
  /// At the grammar's start. `eos_id` (-1: none) is the token that ends the text, allowed only
  /// when the text is a whole sentence.
  GrammarMatcher(TokenGrammar grammar, std::int32_t eos_id);
  /// A copy stands where `other` stands, with an empty mask LRU of its own (the TokenGrammar's
  /// shared mask cache still serves it): speculative decoding follows each draft path on one.
  GrammarMatcher(const GrammarMatcher& other) : g_(other.g_), eos_id_(other.eos_id_), state_(other.state_) {}
  GrammarMatcher& operator=(const GrammarMatcher& other) {
    if (this != &other) *this = GrammarMatcher(other);
    return *this;
  }
  GrammarMatcher(GrammarMatcher&&) = default;
  GrammarMatcher& operator=(GrammarMatcher&&) = default;

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
  std::vector<std::uint8_t> compute_mask() const;
  bool takes(std::int32_t id) const;

  TokenGrammar g_;
  std::int32_t eos_id_;
  GrammarState state_;
  // Masks of states seen before (allowed[id], without eos), least recently used evicted first.
  std::list<std::pair<std::string, std::vector<std::uint8_t>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> cache_;
};

}  // namespace peregrine

#include "peregrine/sampling/grammar_matcher.h"

#include <algorithm>
#include <limits>

namespace peregrine {
namespace {

constexpr std::size_t kCachedMasks = 256;
using Kind = GrammarElement::Kind;
using Stack = std::vector<std::uint32_t>;

void sort_unique(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// Brings `stack` to a character class on top (or empty), forking at every rule reference.
void expand(const Grammar& gr, Stack stack, std::vector<Stack>& out) {
  if (stack.empty() || gr.elements()[stack.back()].kind == Kind::kChars) {
    out.push_back(std::move(stack));
    return;
  }
  const std::uint32_t top = stack.back();
  stack.pop_back();
  if (gr.elements()[top + 1].kind != Kind::kEnd) stack.push_back(top + 1);  // where to continue after the rule
  for (std::uint32_t a : gr.alternatives(gr.elements()[top].value)) {
    Stack next = stack;
    if (gr.elements()[a].kind != Kind::kEnd) next.push_back(a);
    expand(gr, std::move(next), out);
  }
}

std::vector<Stack> advance_char(const Grammar& gr, const std::vector<Stack>& stacks, std::uint32_t cp) {
  std::vector<Stack> out;
  for (const Stack& s : stacks) {
    if (s.empty() || !gr.char_sets()[gr.elements()[s.back()].value].contains(cp)) continue;
    Stack next = s;
    if (gr.elements()[++next.back()].kind == Kind::kEnd) next.pop_back();
    expand(gr, std::move(next), out);
  }
  sort_unique(out);
  return out;
}

// One byte of UTF-8: a whole character advances the stacks; a partial one must still fit some
// stack's class. False when nothing survives, or when the bytes are not well-formed UTF-8
// (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF; a byte-level
// vocabulary has single-byte tokens that could spell them).
bool advance_byte(const Grammar& gr, const GrammarState& from, std::uint8_t byte, GrammarState& to) {
  std::uint32_t value = 0, pending = 0, min = 0;
  if (from.pending > 0) {
    if ((byte & 0xC0) != 0x80) return false;
    value = (from.partial << 6) | (byte & 0x3F);
    pending = from.pending - 1;
    min = from.min;
  } else if (byte < 0x80) {
    value = byte;
  } else if ((byte & 0xE0) == 0xC0) {
    value = byte & 0x1F, pending = 1, min = 0x80;
  } else if ((byte & 0xF0) == 0xE0) {
    value = byte & 0x0F, pending = 2, min = 0x800;
  } else if ((byte & 0xF8) == 0xF0) {
    value = byte & 0x07, pending = 3, min = 0x10000;
  } else {
    return false;
  }
  if (pending == 0) {
    if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return false;
    to.stacks = advance_char(gr, from.stacks, value);
    to.partial = to.pending = to.min = 0;
    return !to.stacks.empty();
  }
  const std::uint32_t lo = std::max(value << (6 * pending), min);
  const std::uint32_t hi = std::min((value << (6 * pending)) | ((1u << (6 * pending)) - 1), 0x10FFFFu);
  if (lo > hi) return false;
  const bool fits = std::any_of(from.stacks.begin(), from.stacks.end(), [&](const Stack& s) {
    return !s.empty() && gr.char_sets()[gr.elements()[s.back()].value].intersects(lo, hi);
  });
  if (!fits) return false;
  to.stacks = from.stacks;
  to.partial = value;
  to.pending = pending;
  to.min = min;
  return true;
}

bool has_empty_stack(const GrammarState& s) {
  return std::any_of(s.stacks.begin(), s.stacks.end(), [](const Stack& st) { return st.empty(); });
}

void set_bit(std::vector<std::uint64_t>& bits, std::int32_t id) {
  bits[static_cast<std::size_t>(id) / 64] |= std::uint64_t{1} << (id % 64);
}
bool test_bit(const std::vector<std::uint64_t>& bits, std::int32_t id) {
  return (bits[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1u;
}

// Every token of the trie below `node` (excluding those ending at it).
void mark_subtree(const TokenTrie& trie, std::uint32_t node, std::vector<std::uint64_t>& bits) {
  const TokenTrie::Node& n = trie.nodes()[node];
  for (std::uint32_t c = n.child_first; c < n.child_first + n.n_children; ++c) {
    const TokenTrie::Node& child = trie.nodes()[c];
    for (std::uint32_t i = 0; i < child.n_tokens; ++i) set_bit(bits, trie.token_ids()[child.token_first + i]);
    mark_subtree(trie, c, bits);
  }
}

// The walk from a stack's top elements: tokens ending at a live node are accepted; below a
// node where they ran out (an empty stack) with bytes still to come, tokens are uncertain when
// the stack goes on below them (`cut`: they continue in what lies there).
void walk_position(const Grammar& gr, const TokenTrie& trie, std::uint32_t node, const GrammarState& state, bool cut,
                   std::vector<std::uint64_t>& accepted, std::vector<std::uint64_t>& uncertain) {
  const TokenTrie::Node& n = trie.nodes()[node];
  for (std::uint32_t i = 0; i < n.n_tokens; ++i) set_bit(accepted, trie.token_ids()[n.token_first + i]);
  if (cut && state.pending == 0 && has_empty_stack(state)) mark_subtree(trie, node, uncertain);
  GrammarState next;
  for (std::uint32_t c = n.child_first; c < n.child_first + n.n_children; ++c) {
    if (advance_byte(gr, state, trie.nodes()[c].byte, next)) walk_position(gr, trie, c, next, cut, accepted, uncertain);
  }
}

std::string state_key(const GrammarState& state) {
  std::string k;
  for (std::uint32_t v : {state.partial, state.pending, state.min}) k.append(reinterpret_cast<const char*>(&v), sizeof v);
  for (const Stack& s : state.stacks) {
    const auto n = static_cast<std::uint32_t>(s.size());
    k.append(reinterpret_cast<const char*>(&n), sizeof n);
    k.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(std::uint32_t));
  }
  return k;
}

}  // namespace

TokenMaskCache::TokenMaskCache(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}

const TokenMaskCache::PositionMasks& TokenMaskCache::at(std::span<const std::uint32_t> stack) {
  const bool whole = stack.size() <= kSuffix;
  const std::span<const std::uint32_t> suffix = whole ? stack : stack.last(kSuffix);
  std::string key(1, whole ? 'w' : 's');
  key.append(reinterpret_cast<const char*>(suffix.data()), suffix.size_bytes());
  std::lock_guard lock(mu_);
  std::unique_ptr<PositionMasks>& slot = masks_[key];
  if (slot) return *slot;
  const std::size_t words = (static_cast<std::size_t>(vocabulary_->vocab_size()) + 63) / 64;
  std::vector<std::uint64_t> accepted(words, 0), uncertain(words, 0);
  GrammarState start;
  start.stacks = {Stack(suffix.begin(), suffix.end())};
  walk_position(*grammar_, *vocabulary_, 0, start, !whole, accepted, uncertain);
  slot = std::make_unique<PositionMasks>();
  for (std::int32_t id = 0; id < vocabulary_->vocab_size(); ++id) {
    if (test_bit(uncertain, id) && !test_bit(accepted, id)) slot->uncertain.push_back(id);
  }
  slot->accepted = std::move(accepted);
  return *slot;
}

TokenGrammar TokenGrammar::of(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary) {
  auto masks = std::make_shared<TokenMaskCache>(grammar, vocabulary);
  return {std::move(grammar), std::move(vocabulary), std::move(masks)};
}

GrammarMatcher::GrammarMatcher(TokenGrammar grammar, std::int32_t eos_id) : g_(std::move(grammar)), eos_id_(eos_id) {
  const Grammar& gr = *g_.grammar;
  for (std::uint32_t a : gr.alternatives(gr.root())) {
    expand(gr, gr.elements()[a].kind == Kind::kEnd ? Stack{} : Stack{a}, state_.stacks);
  }
  sort_unique(state_.stacks);
}

// Whether the grammar takes token `id`'s bytes from the current state.
bool GrammarMatcher::takes(std::int32_t id) const {
  const std::string& bytes = g_.vocabulary->bytes(id);
  if (bytes.empty()) return false;
  GrammarState state = state_, next;
  for (char c : bytes) {
    if (!advance_byte(*g_.grammar, state, static_cast<std::uint8_t>(c), next)) return false;
    std::swap(state, next);
  }
  return true;
}

// allowed[id] for the current state (without eos): the union of the stacks' position masks,
// then their uncertain tokens checked one by one. In the middle of a character (a token that
// ended inside one), every token is checked.
std::vector<std::uint8_t> GrammarMatcher::compute_mask() const {
  const auto vocab = static_cast<std::size_t>(g_.vocabulary->vocab_size());
  std::vector<std::uint8_t> allowed(vocab, 0);
  if (state_.pending > 0) {
    for (std::size_t id = 0; id < vocab; ++id) allowed[id] = takes(static_cast<std::int32_t>(id)) ? 1 : 0;
    return allowed;
  }
  std::vector<std::uint64_t> bits((vocab + 63) / 64, 0);
  std::vector<std::int32_t> candidates;
  for (const Stack& s : state_.stacks) {
    if (s.empty()) continue;
    const TokenMaskCache::PositionMasks& m = g_.masks->at(s);
    for (std::size_t w = 0; w < bits.size(); ++w) bits[w] |= m.accepted[w];
    candidates.insert(candidates.end(), m.uncertain.begin(), m.uncertain.end());
  }
  for (std::int32_t id : candidates) {
    if (!test_bit(bits, id) && takes(id)) set_bit(bits, id);
  }
  for (std::size_t id = 0; id < vocab; ++id) allowed[id] = test_bit(bits, static_cast<std::int32_t>(id)) ? 1 : 0;
  return allowed;
}

std::int64_t GrammarMatcher::mask(std::span<float> logits) {
  const std::string k = state_key(state_);
  auto it = cache_.find(k);
  if (it == cache_.end()) {
    if (lru_.size() >= kCachedMasks) {
      cache_.erase(lru_.back().first);
      lru_.pop_back();
    }
    lru_.emplace_front(k, compute_mask());
    it = cache_.emplace(k, lru_.begin()).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  const std::vector<std::uint8_t>& allowed = it->second->second;
  const bool eos_ok = can_end();
  std::int64_t n = 0;
  for (std::size_t id = 0; id < logits.size(); ++id) {
    const bool ok = static_cast<std::int32_t>(id) == eos_id_ ? eos_ok : id < allowed.size() && allowed[id] != 0;
    if (ok) {
      ++n;
    } else {
      logits[id] = -std::numeric_limits<float>::infinity();
    }
  }
  return n;
}

Status GrammarMatcher::accept(std::int32_t id) {
  if (id == eos_id_ && eos_id_ >= 0) {
    if (!can_end()) return invalid_argument("grammar: the end of the text is not allowed here");
    state_.stacks.assign(1, Stack{});
    state_.partial = state_.pending = state_.min = 0;
    return Status::ok();
  }
  const std::string& bytes = g_.vocabulary->bytes(id);
  if (bytes.empty()) return invalid_argument("grammar: token " + std::to_string(id) + " has no text the grammar could match");
  GrammarState state = state_, next;
  for (char c : bytes) {
    if (!advance_byte(*g_.grammar, state, static_cast<std::uint8_t>(c), next)) {
      return invalid_argument("grammar: token " + std::to_string(id) + " is not allowed here");
    }
    std::swap(state, next);
  }
  state_ = std::move(state);
  return Status::ok();
}

bool GrammarMatcher::can_end() const { return state_.pending == 0 && has_empty_stack(state_); }

bool GrammarMatcher::must_end() const {
  return state_.pending == 0 && std::all_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace peregrine

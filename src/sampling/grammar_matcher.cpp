#include "peregrine/sampling/grammar_matcher.h"

#include <algorithm>
#include <limits>

namespace peregrine {
namespace {

constexpr std::size_t kCachedMasks = 256;
using Kind = GrammarElement::Kind;

void sort_unique(std::vector<std::vector<std::uint32_t>>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

GrammarMatcher::GrammarMatcher(TokenGrammar grammar, std::int32_t eos_id) : g_(std::move(grammar)), eos_id_(eos_id) {
  const Grammar& gr = *g_.grammar;
  for (std::uint32_t a : gr.alternatives(gr.root())) {
    expand(gr.elements()[a].kind == Kind::kEnd ? Stack{} : Stack{a}, state_.stacks);
  }
  sort_unique(state_.stacks);
}

// Brings `stack` to a character class on top (or empty), forking at every rule reference.
void GrammarMatcher::expand(Stack stack, std::vector<Stack>& out) const {
  const Grammar& gr = *g_.grammar;
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
    expand(std::move(next), out);
  }
}

std::vector<GrammarMatcher::Stack> GrammarMatcher::advance_char(const std::vector<Stack>& stacks, std::uint32_t cp) const {
  const Grammar& gr = *g_.grammar;
  std::vector<Stack> out;
  for (const Stack& s : stacks) {
    if (s.empty() || !gr.char_sets()[gr.elements()[s.back()].value].contains(cp)) continue;
    Stack next = s;
    if (gr.elements()[++next.back()].kind == Kind::kEnd) next.pop_back();
    expand(std::move(next), out);
  }
  sort_unique(out);
  return out;
}

// One byte of UTF-8: a whole character advances the stacks; a partial one must still fit some
// stack's class. False when nothing survives, or when the bytes are not well-formed UTF-8
// (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF; a byte-level
// vocabulary has single-byte tokens that could spell them).
bool GrammarMatcher::advance_byte(const State& from, std::uint8_t byte, State& to) const {
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
    to.stacks = advance_char(from.stacks, value);
    to.partial = to.pending = to.min = 0;
    return !to.stacks.empty();
  }
  const std::uint32_t lo = std::max(value << (6 * pending), min);
  const std::uint32_t hi = std::min((value << (6 * pending)) | ((1u << (6 * pending)) - 1), 0x10FFFFu);
  if (lo > hi) return false;
  const Grammar& gr = *g_.grammar;
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

void GrammarMatcher::walk(std::uint32_t node, const State& state, std::vector<std::uint8_t>& allowed) const {
  const TokenTrie& trie = *g_.vocabulary;
  const TokenTrie::Node& n = trie.nodes()[node];
  for (std::uint32_t i = 0; i < n.n_tokens; ++i) allowed[static_cast<std::size_t>(trie.token_ids()[n.token_first + i])] = 1;
  State next;
  for (std::uint32_t c = n.child_first; c < n.child_first + n.n_children; ++c) {
    if (advance_byte(state, trie.nodes()[c].byte, next)) walk(c, next, allowed);
  }
}

std::string GrammarMatcher::key(const State& state) {
  std::string k;
  for (std::uint32_t v : {state.partial, state.pending, state.min}) k.append(reinterpret_cast<const char*>(&v), sizeof v);
  for (const Stack& s : state.stacks) {
    const auto n = static_cast<std::uint32_t>(s.size());
    k.append(reinterpret_cast<const char*>(&n), sizeof n);
    k.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(std::uint32_t));
  }
  return k;
}

std::int64_t GrammarMatcher::mask(std::span<float> logits) {
  const std::string k = key(state_);
  auto it = cache_.find(k);
  if (it == cache_.end()) {
    std::vector<std::uint8_t> allowed(static_cast<std::size_t>(g_.vocabulary->vocab_size()), 0);
    walk(0, state_, allowed);
    if (lru_.size() >= kCachedMasks) {
      cache_.erase(lru_.back().first);
      lru_.pop_back();
    }
    lru_.emplace_front(k, std::move(allowed));
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
  State state = state_, next;
  for (char c : bytes) {
    if (!advance_byte(state, static_cast<std::uint8_t>(c), next)) {
      return invalid_argument("grammar: token " + std::to_string(id) + " is not allowed here");
    }
    state = std::move(next);
  }
  state_ = std::move(state);
  return Status::ok();
}

bool GrammarMatcher::can_end() const {
  return state_.pending == 0 && std::any_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::must_end() const {
  return state_.pending == 0 && std::all_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace peregrine

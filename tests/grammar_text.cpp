#include "grammar_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace peregrine::test {

std::vector<std::int32_t> spell(const TokenTrie& trie, std::string_view text) {
  std::vector<std::int32_t> ids;
  for (std::size_t pos = 0; pos < text.size();) {
    std::uint32_t node = 0;
    std::int32_t best = -1;
    std::size_t best_len = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
      const TokenTrie::Node& n = trie.nodes()[node];
      std::uint32_t next = 0;
      for (std::uint32_t c = n.child_first; c < n.child_first + n.n_children; ++c) {
        if (trie.nodes()[c].byte == static_cast<std::uint8_t>(text[i])) next = c;
      }
      if (next == 0) break;
      node = next;
      if (trie.nodes()[node].n_tokens > 0) {
        best = trie.token_ids()[trie.nodes()[node].token_first];
        best_len = i + 1 - pos;
      }
    }
    EXPECT_GE(best, 0) << "no token spells byte " << pos << " of " << text;
    if (best < 0) return ids;
    ids.push_back(best);
    pos += best_len;
  }
  return ids;
}

TextRun run(const Tokenizer& tok, const std::shared_ptr<const TokenTrie>& trie, std::shared_ptr<const Grammar> g,
            std::string_view text) {
  GrammarMatcher m(TokenGrammar::of(std::move(g), trie), tok.eos_id());
  TextRun r;
  std::vector<float> logits(static_cast<std::size_t>(tok.vocab_size()));
  for (std::int32_t id : spell(*trie, text)) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    m.mask(logits);
    if (std::isinf(logits[static_cast<std::size_t>(id)]) || !m.accept(id)) {
      r.accepted = false;
      return r;
    }
  }
  r.complete = m.can_end();
  return r;
}

}  // namespace peregrine::test

// Texts through a grammar matcher for the sampling tests: a text spelled with real vocabulary
// tokens, each checked against the mask, then accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "peregrine/sampling/grammar_matcher.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::test {

/// `text` as the longest vocabulary tokens that spell it, left to right (a SentencePiece
/// encode() would add its dummy-prefix space; the matcher only sees each token's bytes).
/// Fails the calling test when no token spells some byte.
std::vector<std::int32_t> spell(const TokenTrie& trie, std::string_view text);

struct TextRun {
  bool accepted = true;  // every token was in the mask and accept() took it
  bool complete = false;  // then the grammar could end
};

/// Feeds `text`'s tokens (spell) through a matcher of `g`, checking each against the mask first.
TextRun run(const Tokenizer& tok, const std::shared_ptr<const TokenTrie>& trie, std::shared_ptr<const Grammar> g,
            std::string_view text);

}  // namespace peregrine::test

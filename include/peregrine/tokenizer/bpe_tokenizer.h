// GPT-2 byte-level BPE (Radford et al. 2019; Sennrich et al. 2016 for BPE itself).
//
// encode: split out user-defined tokens, pre-tokenize each remaining fragment with the
// vocabulary's regex list, map each word's bytes to the byte-level alphabet (byte_level.h),
// start from its characters and repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost); a final symbol missing from the vocabulary falls back to its characters.
// decode: byte-level pieces map back to bytes, user-defined pieces are copied verbatim,
// control tokens give "".
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/tokenizer/merge_ranks.h"
#include "peregrine/tokenizer/pretokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// How a BpeTokenizer pre-tokenizes and whether prompts start with BOS.
struct BpeOptions {
  PreTokenizerSpec pre;           // regex list (+ ignore_merges)
  bool add_prefix_space = false;  // HF ByteLevel add_prefix_space: prepend " " to each fragment
  bool add_bos_default = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  /// Builds the tokenizer from a vocabulary on which Vocab::finalize() succeeded (byte-level
  /// pieces) and its merges in rank order (first = merged first; rules whose parts are not
  /// pieces are dropped). Errors: kUnsupported when a pre-tokenizer regex does not compile.
  static Expected<std::unique_ptr<BpeTokenizer>> create(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  /// Tokenizer interface (contracts in tokenizer.h; none of these fail); kind() is "bpe".
  using Tokenizer::encode;
  std::vector<std::int32_t> encode(std::string_view text, bool add_bos, ParseSpecial parse) const override;
  std::string decode_token(std::int32_t prev, std::int32_t id) const override;
  std::string piece(std::int32_t id) const override;
  std::int32_t vocab_size() const override { return vocab_.size(); }
  std::int32_t bos_id() const override { return vocab_.bos_id; }
  std::int32_t eos_id() const override { return vocab_.eos_id; }
  std::string kind() const override { return "bpe"; }
  bool add_bos_default() const override { return options_.add_bos_default; }

  /// The vocabulary (byte-level pieces, types, special ids).
  const Vocab& vocab() const { return vocab_; }

 private:
  BpeTokenizer(Vocab vocab, MergeRanks ranks, PreTokenizer pre, BpeOptions options);
  void encode_fragment(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;
  void emit_symbol(std::string_view symbol, std::vector<std::int32_t>& out) const;

  Vocab vocab_;
  MergeRanks ranks_;
  PreTokenizer pre_;
  BpeOptions options_;
};

}  // namespace peregrine

// SentencePiece-style BPE with scores and byte fallback (Kudo & Richardson 2018; the
// algorithm of sentencepiece's bpe_model.cc, as used by Llama 1/2, Mistral, Phi-3).
//
// encode: split out user-defined tokens; for each remaining fragment add the dummy-prefix
// space (only at the start of the text or right after a verbatim token, when enabled), replace
// every ' ' by U+2581 "▁", start from the UTF-8 characters and repeatedly merge the adjacent
// pair whose concatenation is a normal/user-defined/unused piece with the highest score (ties:
// leftmost). Control, unknown and byte pieces never result from merges. A final symbol that is
// not a piece falls back to one <0xXX> byte token per byte (or UNK without byte tokens).
// With ranked merges (Hugging Face tokenizer.json BPE + byte_fallback) the pair with the lowest
// merge rank is merged instead of the highest-scoring piece.
// decode: "▁" → ' ', <0xXX> → the raw byte, control → "", unknown → " ⁇ ", user-defined pieces
// verbatim; the dummy-prefix space of the first piece (at the start or right after BOS) is
// dropped, as SentencePiece's decoder, llama2.c run.c and llama.cpp do.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peregrine/tokenizer/merge_ranks.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// How an SpmTokenizer normalizes and merges, and whether prompts start with BOS.
struct SpmOptions {
  bool add_space_prefix = true;  // SentencePiece normalizer add_dummy_prefix
  /// Add the dummy prefix only at the very start of the text, not after verbatim tokens
  /// (HF Metaspace prepend_scheme "first"); false is SentencePiece/llama.cpp behaviour.
  bool space_prefix_only_at_start = false;
  /// Merge only inside "▁"-initial words (HF Metaspace split=true); false merges across them.
  bool split_words = false;
  bool add_bos_default = true;
  std::optional<MergeRanks> ranks;  // set: merge by rank (HF BPE), unset: by piece score
};

class SpmTokenizer final : public Tokenizer {
 public:
  /// Wraps a vocabulary on which Vocab::finalize() succeeded (the caller's duty; nothing is
  /// re-validated), with `options`. Cannot fail.
  static std::unique_ptr<SpmTokenizer> create(Vocab vocab, SpmOptions options);

  /// Tokenizer interface (contracts in tokenizer.h; none of these fail); kind() is "spm".
  using Tokenizer::encode;
  std::vector<std::int32_t> encode(std::string_view text, bool add_bos, ParseSpecial parse) const override;
  std::string decode_token(std::int32_t prev, std::int32_t id) const override;
  std::string piece(std::int32_t id) const override;
  std::int32_t vocab_size() const override { return vocab_.size(); }
  std::int32_t bos_id() const override { return vocab_.bos_id; }
  std::int32_t eos_id() const override { return vocab_.eos_id; }
  std::string kind() const override { return "spm"; }
  bool add_bos_default() const override { return options_.add_bos_default; }

  /// The vocabulary (pieces, scores, types, special ids).
  const Vocab& vocab() const { return vocab_; }

 private:
  SpmTokenizer(Vocab vocab, SpmOptions options) : vocab_(std::move(vocab)), options_(std::move(options)) {}
  void encode_fragment(std::string_view text, bool prefix_space, std::vector<std::int32_t>& out) const;
  void encode_normalized(std::string_view norm, std::vector<std::int32_t>& out) const;
  std::optional<double> pair_priority(std::string_view left, std::string_view right) const;
  std::int32_t mergeable_id(std::string_view piece) const;
  void emit_symbol(std::string_view symbol, std::vector<std::int32_t>& out) const;

  Vocab vocab_;
  SpmOptions options_;
};

}  // namespace peregrine

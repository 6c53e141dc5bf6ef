// Text ↔ token ids. One interface over SentencePiece-style BPE (scores + byte fallback; Kudo &
// Richardson 2018) and GPT-2 byte-level BPE (merges + pre-tokenizer regex; Radford et al. 2019),
// loaded from whatever the model ships (GGUF tokenizer.ggml.*, HF tokenizer.json, SentencePiece
// .model, llama2.c tokenizer.bin). Token ids are int32 in [0, vocab_size()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Whether Tokenizer::encode matches the text of control tokens ("<|im_start|>", "<s>") as
/// those tokens (llama.cpp's parse_special). User-defined tokens are matched either way.
enum class ParseSpecial : bool { kNo = false, kYes = true };

/// A tokenizer. Thread-safe for concurrent const use.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids of `text` (UTF-8). `add_bos` prepends the BOS id when the vocabulary has one.
  /// With ParseSpecial::kNo, special-token strings in `text` (e.g. "<s>") are tokenized as
  /// plain text (llama.cpp's parse_special=false); with kYes every control, unknown and
  /// user-defined token's text becomes that token, longest first (llama.cpp's
  /// tokenizer_st_partition with parse_special=true: what chat templates need). Never fails:
  /// text the vocabulary cannot cover becomes byte tokens or UNK; invalid UTF-8 is tokenized
  /// bytewise.
  virtual std::vector<std::int32_t> encode(std::string_view text, bool add_bos, ParseSpecial parse) const = 0;
  /// encode(text, add_bos, ParseSpecial::kNo).
  std::vector<std::int32_t> encode(std::string_view text, bool add_bos) const {
    return encode(text, add_bos, ParseSpecial::kNo);
  }

  /// The bytes a token contributes to the output when it follows `prev` (streaming decode):
  /// byte-fallback tokens give their raw byte (possibly part of a UTF-8 sequence), SPM "▁"
  /// becomes a space (dropped at the start of the text, right after BOS), GPT-2 byte-level
  /// pieces map back to bytes, control tokens (BOS/EOS) give "". `prev` is -1 at the start.
  /// An id outside [0, vocab_size()) gives "" (never fails).
  virtual std::string decode_token(std::int32_t prev, std::int32_t id) const = 0;

  /// Concatenated decode_token over `ids` (the inverse of encode(text, false) for any text the
  /// vocabulary covers). Ids outside the vocabulary contribute nothing; never fails.
  std::string decode(std::span<const std::int32_t> ids) const;

  /// The raw vocabulary entry of `id` ("▁the", "<0x0A>", "Ġthe"), for `tokenize` listings;
  /// "" for an id outside the vocabulary.
  virtual std::string piece(std::int32_t id) const = 0;

  /// Number of tokens (ids are 0 .. vocab_size() - 1).
  virtual std::int32_t vocab_size() const = 0;
  /// Begin-of-sequence id, or -1 when the vocabulary has none.
  virtual std::int32_t bos_id() const = 0;
  /// End-of-sequence id, or -1 when the vocabulary has none.
  virtual std::int32_t eos_id() const = 0;
  /// "spm" (SentencePiece-style BPE with scores), "bpe" (GPT-2 byte-level), "sentencepiece"
  /// (libsentencepiece .model).
  virtual std::string kind() const = 0;
  /// Whether prompts for this model should start with BOS (GGUF tokenizer.ggml.add_bos_token,
  /// tokenizer.json's post-processor; SentencePiece vocabularies default to true, GPT-2
  /// byte-level BPE to false). A hint for callers of encode(); encode itself never guesses.
  virtual bool add_bos_default() const = 0;
};

/// The tokenizer that belongs to `model`: GGUF metadata (tokenizer.ggml.*); otherwise the file
/// formats/model_writer.h's tokenizer_file_of finds (llama2.c: tokenizer.bin or tok512.bin
/// beside the checkpoint; Hugging Face folder: tokenizer.json, tokenizer.model, tokenizer.bin
/// or tokenizer.gguf, the last two as save_hf_model writes them). `override_path` (the CLI's --tokenizer) takes precedence: a llama2.c
/// tokenizer.bin, a tokenizer.model, a tokenizer.json, or a vocab GGUF.
/// Errors: kNotFound (no tokenizer found), kCorruptFile / kUnsupported from the readers,
/// kInvalidArgument when the tokenizer has more tokens than the model's vocab_size.
Expected<std::unique_ptr<Tokenizer>> load_tokenizer(const ModelFile& model,
                                                    const std::string& override_path = "");

/// Loads a tokenizer from a single file: *.gguf (vocab metadata), tokenizer.json,
/// *.model (SentencePiece protobuf), or a llama2.c tokenizer.bin (anything else); a directory
/// means the first of its tokenizer.json, tokenizer.model, tokenizer.bin, tok512.bin,
/// tokenizer.gguf. GGUF is
/// recognised by extension or by its "GGUF" magic.
/// Errors: kNotFound (no such file, or a directory without a tokenizer), and those of
/// load_gguf_tokenizer_file, load_hf_tokenizer_json, load_sentencepiece_model,
/// load_llama2c_tokenizer.
Expected<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path);

}  // namespace peregrine

// Hugging Face tokenizers `tokenizer.json` (model.type "BPE"), following the schema the
// `tokenizers` library serializes (huggingface/tokenizers: model, added_tokens, normalizer,
// pre_tokenizer, post_processor, decoder), and the bos_token / eos_token / add_bos_token
// fields of transformers' tokenizer_config.json.
//
// Two flavours are recognised:
//  * byte-level BPE (GPT-2, Llama 3, Qwen ...): a ByteLevel pre-tokenizer/decoder; the regexes
//    come from the pre-tokenizer (ByteLevel use_regex → the GPT-2 regex, Split{Regex|String,
//    behavior Isolated}, Digits, Sequence of these) → BpeTokenizer;
//  * SentencePiece-converted BPE (Llama 2, Mistral ...): a Prepend/Replace "▁" normalizer or a
//    Metaspace pre-tokenizer, byte_fallback → SpmTokenizer merging by merge rank.
// model.vocab (piece → id), model.merges ("a b" strings or ["a", "b"] pairs), added_tokens
// (special → control, otherwise user-defined), model.unk_token, model.ignore_merges.
// BOS/EOS come from the caller's hints (tokenizer_config.json), else from the post-processor
// template's leading special token (BOS) and well-known piece names.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// Values from tokenizer_config.json that tokenizer.json itself does not carry (unset: decided
/// from tokenizer.json itself).
struct HfTokenizerHints {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<bool> add_bos_token;
};

/// Parses tokenizer.json text (untrusted) into a BpeTokenizer (byte-level) or SpmTokenizer
/// (SentencePiece-style); `hints` override BOS/EOS/add-BOS. `what` names the source in errors.
/// Errors: kCorruptFile (malformed JSON or invalid UTF-8, duplicate object keys, JSON nested
/// deeper than 64 levels, Sequence components nested deeper than 8, missing/mistyped fields,
/// ids out of range, bad merges), kUnsupported (model types other than BPE, unknown
/// pre-tokenizers, a tokenizer that is neither byte-level nor Metaspace/byte_fallback).
Expected<std::unique_ptr<Tokenizer>> parse_hf_tokenizer_json(std::string_view json_text, const std::string& what,
                                                             const HfTokenizerHints& hints = {});

/// Loads `path` (a tokenizer.json) with hints from a tokenizer_config.json in the same folder,
/// when there is one (it is parsed as strictly as tokenizer.json).
/// Errors: those of MappedFile::open and parse_hf_tokenizer_json; kCorruptFile naming
/// tokenizer_config.json when that file is empty, malformed or not a JSON object.
Expected<std::unique_ptr<Tokenizer>> load_hf_tokenizer_json(const std::string& path);

}  // namespace peregrine

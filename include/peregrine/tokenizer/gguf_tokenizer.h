// Tokenizer from GGUF metadata (ggml/docs/gguf.md, "Tokenizer" section).
//
// Keys read: tokenizer.ggml.model ("llama" → SpmTokenizer, "gpt2" → BpeTokenizer),
// tokenizer.ggml.tokens, .scores (optional), .token_type (optional), .merges (gpt2),
// .pre (gpt2; pre-tokenizer name, default "default"), .bos_token_id / .eos_token_id /
// .unknown_token_id (optional; "llama" defaults 1/2/0 as llama.cpp does), .add_bos_token,
// .add_space_prefix ("llama"; default true).
#pragma once

#include <memory>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// The tokenizer described by `gguf`'s metadata; `what` names the file in errors.
/// Errors: kNotFound (no tokenizer.ggml.model / tokens), kUnsupported (a model other than
/// "llama"/"gpt2", an unknown pre-tokenizer), kCorruptFile (wrong key types, array lengths
/// that disagree, special ids outside the vocabulary, malformed merges).
Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& gguf, const std::string& what);

/// Opens a GGUF file (model or vocab-only) and loads its tokenizer.
/// Errors: those of GgufFile::open (kNotFound, kCorruptFile, kUnsupported) and
/// load_gguf_tokenizer.
Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer_file(const std::string& path);

}  // namespace peregrine

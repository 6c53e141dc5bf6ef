// Real tokenizers and small helpers for the server tests.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::test {

/// stories260K's own tokenizer (llama2.c tok512.bin: SentencePiece-style, byte fallback).
std::unique_ptr<Tokenizer> stories_tokenizer();
/// GPT-2's byte-level BPE (../shared/tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf).
std::unique_ptr<Tokenizer> gpt2_tokenizer();

/// Whether `s` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or truncations).
bool valid_utf8(std::string_view s);

}  // namespace peregrine::test

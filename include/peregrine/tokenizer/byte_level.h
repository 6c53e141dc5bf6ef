// GPT-2 byte-level alphabet: every byte ↔ one printable Unicode character.
//
// Spec: OpenAI GPT-2 encoder.py `bytes_to_unicode` (Radford et al. 2019), used by every
// byte-level BPE (Hugging Face ByteLevel pre-tokenizer/decoder, GGUF tokenizer.ggml.model
// "gpt2"). Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to the code point of the same value;
// the remaining 68 bytes (controls, space, DEL, 0x80-0xA0, soft hyphen) map in increasing
// order to U+0100, U+0101, ... (so the space 0x20 becomes U+0120 "Ġ", '\n' becomes "Ċ").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine {

/// Code point that stands for `byte` in byte-level pieces.
std::uint32_t byte_to_codepoint(std::uint8_t byte);

/// The byte a code point stands for, or -1 when `cp` is not in the byte-level alphabet.
int codepoint_to_byte(std::uint32_t cp);

/// Maps raw bytes to their byte-level text (UTF-8), e.g. " the" → "Ġthe".
std::string byte_level_encode(std::string_view bytes);

/// Inverse of byte_level_encode: "Ġthe" → " the". Characters outside the alphabet (pieces
/// added verbatim, e.g. user-defined tokens) are copied through unchanged.
std::string byte_level_decode(std::string_view piece);

}  // namespace peregrine

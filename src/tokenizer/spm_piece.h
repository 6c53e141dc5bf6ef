// SentencePiece piece surface forms, shared by SpmTokenizer and the libsentencepiece wrapper
// (private to src/tokenizer).
//
// Spec: sentencepiece's normalizer ("▁" U+2581 stands for a space, add_dummy_prefix) and
// SentencePieceProcessor::Decode (unknown → " ⁇ ", control → "", byte pieces "<0xXX>" → the
// raw byte, the dummy-prefix space of the first piece dropped); llama.cpp and llama2.c run.c
// drop that space at the start of the text and right after BOS.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// U+2581 LOWER ONE EIGHTH BLOCK "▁", SentencePiece's stand-in for a space.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";
/// What SentencePiece decodes an unknown token to: " ⁇ " (U+2047 with spaces).
inline constexpr std::string_view kSpmUnknownSurface = " \xE2\x81\x87 ";

/// Whether a piece decoded after `prev` (-1 at the start of the text) is the first piece of
/// the text, i.e. its leading dummy-prefix space must be dropped when the model adds one.
inline bool spm_at_text_start(std::int32_t prev, std::int32_t bos_id) {
  return prev < 0 || (bos_id >= 0 && prev == bos_id);
}

/// The bytes one SentencePiece piece of type `type` decodes to: control → "", unknown → " ⁇ ",
/// user-defined → the piece verbatim, byte → its raw byte ("<0x0A>" → '\n'; a byte-typed piece
/// of another shape is copied verbatim), anything else → the piece with "▁" → ' ', minus its
/// leading space when `drop_leading_space` (the dummy prefix at the start of the text).
std::string spm_decode_piece(std::string_view piece, TokenType type, bool drop_leading_space);

}  // namespace peregrine

// llama2.c tokenizer.bin (Karpathy's tokenizer.py export of a SentencePiece model).
//
// Layout (little-endian): int32 max_token_length, then until the end of the file, per token:
// float32 score, int32 byte length, the piece's bytes. Ids 0/1/2 are <unk>/<s>/</s> (stored
// as "<unk>", "\n<s>\n", "\n</s>\n"); "<0xXX>" pieces are byte-fallback tokens; the export
// replaced SentencePiece's "▁" by ' ', which the reader undoes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// Parses a tokenizer.bin image into a finalized vocabulary (ids 0/1/2 = unk/bos/eos, byte
/// pieces typed kByte, "▁" restored). `what` names the source in errors.
/// Errors: kCorruptFile (truncated entry, negative or over-long lengths, non-finite scores,
/// fewer than 3 tokens).
Expected<Vocab> parse_llama2c_vocab(std::span<const std::uint8_t> bytes, const std::string& what);

/// Loads a tokenizer.bin as an SpmTokenizer (dummy prefix on, BOS by default).
/// Errors: those of MappedFile::open and parse_llama2c_vocab.
Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path);

}  // namespace peregrine

// Codes packed LSB-first into a bit stream of little-endian 32-bit words: GPTQ's qweight and
// qzeros packing (AutoGPTQ QuantLinear.pack: value j of a word occupies bits [bits·j,
// bits·(j+1)); 3-bit values straddle words, 32 values in 3 words). The words of one stream may
// be strided: word w lies at byte offset w · stride (a qweight column: stride 4 · out_features).
#pragma once

#include <cstddef>
#include <cstdint>

namespace peregrine {

/// Words holding n codes of `bits` bits: ceil(n · bits / 32).
std::int64_t packed_word_count(std::int64_t n, int bits);

/// Code i of the stream whose words start at `base`, `stride` bytes apart.
/// Precondition: bits in [1, 8], the words it touches lie in the buffer.
unsigned read_packed_code(const std::uint8_t* base, std::size_t stride, std::int64_t i, int bits);

/// Ors `code` (< 2^bits) into code i of the stream (the stream starts zeroed).
/// Precondition: as read_packed_code.
void write_packed_code(std::uint8_t* base, std::size_t stride, std::int64_t i, int bits, unsigned code);

/// Little-endian 32-bit word at `p` (any alignment).
std::uint32_t load_u32(const std::uint8_t* p);
/// Stores `v` little-endian at `p` (any alignment).
void store_u32(std::uint8_t* p, std::uint32_t v);

}  // namespace peregrine

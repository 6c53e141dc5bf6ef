// Q8_0 / Q4_0 blocks → their integer values and scale (for integer dot products).
#pragma once

#include <cstdint>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Values per Q8_0 / Q4_0 block (GGUF QK8_0 = QK4_0 = 32).
inline constexpr std::int64_t kQuantBlock = 32;

/// Unpacks one GGUF block of dtype `t` (kQ8_0: 34 bytes, kQ4_0: 18 bytes, see core/dtype.h;
/// `block` may be unaligned) into its 32 integers `q` and returns the f32 scale d, so that
/// value j = d * q[j]. Q8_0: q = the stored int8; Q4_0: q = nibble - 8 ∈ [-8, 7] (low
/// nibbles are values 0..15, high nibbles 16..31). Precondition: t is kQ8_0 or kQ4_0.
float unpack_block_int8(DType t, const std::uint8_t* block, std::int8_t* q);

}  // namespace peregrine

// Block formats → float32 (GGUF layouts, see core/dtype.h).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Decodes `out.size()` consecutive values of dtype `t` starting at `src` (a row or a run of
/// whole blocks; out.size() must be a multiple of the block size). Q8_0: x = d * q;
/// Q4_0: x = d * (nibble - 8), low nibbles are values 0..15 of a block, high nibbles 16..31.
void dequantize(DType t, const void* src, std::span<float> out);

}  // namespace peregrine

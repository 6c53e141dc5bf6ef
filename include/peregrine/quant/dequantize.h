// Block formats → float32 (GGUF layouts, see core/dtype.h).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/dtype.h"
#include "peregrine/core/tensor.h"

namespace peregrine {

/// Decodes `out.size()` consecutive values of dtype `t` starting at `src` (a row or a run of
/// whole blocks; out.size() must be a multiple of the block size; exactly one row for the
/// row-scaled I8/F8 formats and the N:M sparse formats, which decode to the dense row with zeros
/// where pruned: quant/sparse_nm.h). Q8_0: x = d * q; Q4_0: x = d * (nibble - 8), low nibbles are
/// values 0..15 of a block, high nibbles 16..31; I8: x = s * q; F8: x = s * fp8(f); Q4_1, Q5_0,
/// Q5_1, IQ4_NL, the K-quants and IQ4_XS bit-exact with ggml's dequantize_row_* (layouts and
/// formulas in quant/ggml_blocks.h).
/// Precondition: t != kInt (use dequantize_row).
void dequantize(DType t, const void* src, std::span<float> out);

/// Decodes row `row` of `w` (any dtype, kInt included; out.size() == w.row_length()) to f32.
/// Precondition: 0 <= row < w.n_rows(), w.row_bytes() has a value.
void dequantize_row(const TensorView& w, std::int64_t row, std::span<float> out);

}  // namespace peregrine

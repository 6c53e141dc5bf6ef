// float32 → weight dtypes by round-to-nearest (RTN): the encoders matching quant/dequantize.h.
//
// Spec: ggml (ggml-quants.c quantize_row_q8_0_ref / quantize_row_q4_0_ref and the other block
// formats' encoders, llama.cpp c392e50), block layouts of core/dtype.h and quant/ggml_blocks.h.
// This is the scalar reference; it is bit-exact with the encoders llama-quantize runs without an
// importance matrix (src/quant/ggml_quantize.h).
#pragma once

#include <span>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Encodes `x` (f32 values of one row, or for the block formats a run of whole rows; x.size()
/// must be a multiple of dtype_block_size(t)) into `dst`, which receives
/// dtype_row_bytes(t, x.size()) bytes:
/// - F32: copied.
/// - F16 / BF16: round-to-nearest-even (quant/fp16.h; overflow → inf, NaN stays NaN).
/// - Q8_0, per block of 32: d = absmax / 127, q = roundf(x * (1/d)) (ties away from zero), so
///   q ∈ [-127, 127]; d stored as f16. An all-zero block has d = 0 and q = 0.
/// - Q4_0, per block of 32: m = the value of largest magnitude (signed; the first on ties),
///   d = m / -8, q = min(15, trunc(x * (1/d) + 8.5)) — round-half-up of x/d, plus 8, so m itself
///   encodes as 0 (−8·d) and the other values as 0..15; nibble j holds value j (low) and
///   value j + 16 (high) of the block; d stored as f16 (an all-zero block: d = -0, nibbles 8).
/// - I8 (one row): s = absmax / 127, q = roundf(x / s) ∈ [-127, 127] (per-token int8 of the KV
///   cache); F8_E4M3 / F8_E5M2 (one row): s = absmax / fp8_max, f = fp8(x / s) (quant/fp8.h).
///   s is stored as f32 at the start of the row; an all-zero row has s = 0.
/// - Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: ggml's encoders with their
///   scale searches (src/quant/ggml_quantize.h lists each format's rule).
/// kInt is not handled here (its parameters live in QuantParams): use quant/int_group.h.
/// The quantized values use the f32 d; only the stored scale is rounded to f16 (as ggml does).
void quantize_rtn(DType t, std::span<const float> x, void* dst);

}  // namespace peregrine

// y = x · Wᵀ for FP8 weights (E4M3 / E5M2 with one f32 scale per row) and f32 activations.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// y[t, o] = Σ_i W[o, i] · x[t, i] for the output rows o in [row_begin, row_end) and every token
/// t < n_tokens; other columns of y are left untouched. Single-threaded (matmul splits rows
/// across threads).
/// w: [out, in] DType::kF8E4M3 or kF8E5M2 (core/dtype.h: per row {f32 s; uint8 f[in]}, rows at
/// any byte alignment), W[o, i] = s · fp8(f_i) rounded to f32 once, exactly as dequantize()
/// decodes it (quant/fp8.h; Micikevicius et al. 2022). x: [n_tokens, in] f32.
/// y: [n_tokens, out] f32. Accumulates in f32.
/// Decoding in SIMD without tables: an FP8 byte is moved into the bits of an f16 (E5M2 is the
/// upper byte of an f16; E4M3's exponent and mantissa land in an f16 whose value is 2^-8 of it,
/// subnormals included, the 2^8 folded into the row scale) and widened to f32 (F16C); E4M3's
/// NaN codes stay NaN. 1 token: Σ fp8(f_i)·x_i per row, times the scale once; more tokens: rows
/// decoded once to s·fp8(f) and reused, as gemm_int (decoded_matmul-inl.h).
/// Preconditions (checked by the model at load time; matmul.h): w.dtype is kF8E4M3 or
/// kF8E5M2, w.nbytes == out · (4 + in), 0 <= row_begin <= row_end <= out,
/// x.size() == n_tokens·in, y.size() == n_tokens·out.
/// Scalar reference twin: matmul_reference (matmul.h).
void gemm_fp8(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
              std::span<float> y, std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

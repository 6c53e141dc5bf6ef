// Prefill GEMM for float weights: y = x · Wᵀ for many tokens, packed and register-blocked.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// Weight rows per micro-tile of gemm_float on AVX-512 (half that on x86 targets with 16
/// vector registers), and the thread-split granularity.
inline constexpr std::int64_t kGemmRows = 12;

/// y[t, o] = Σ_i W[o, i] · x[t, i] for the output rows o in [row_begin, row_end) and every
/// token t < n_tokens; other columns of y are left untouched. Single-threaded (callers split
/// rows across threads).
/// w: [out, in] row-major, dtype F32, F16 or BF16, at any byte alignment. x: [n_tokens, in]
/// f32. y: [n_tokens, out] f32. Accumulates in f32, each dot product in order of i.
/// Compute-bound GEMM after Goto & van de Geijn, "Anatomy of High-Performance Matrix
/// Multiplication" (ACM TOMS 2008), with the roles set by y's layout: x is packed (per call,
/// n_tokens·in floats) into k-major panels of 2 SIMD vectors of tokens, zero-padded; blocks of
/// kGemmRows weight rows × 256 inputs are widened to f32 into an L1-resident buffer (the next
/// block prefetched into L2); the micro-kernel keeps a kGemmRows × 2-vector tile of yᵀ in
/// registers (one broadcast weight × one token vector per FMA). Partial sums accumulate in a
/// 48-row yᵀ buffer across input blocks, then are transposed into y.
/// Preconditions (shapes checked by the model at load time, see matmul.h): float dtype,
/// 0 <= row_begin <= row_end <= out, x.size() == n_tokens*in, y.size() == n_tokens*out.
/// Scalar reference twin: float_matmul_reference (float_matmul.h).
void gemm_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                std::span<float> y, std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

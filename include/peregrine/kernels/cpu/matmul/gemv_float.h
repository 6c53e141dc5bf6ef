// Decode GEMV for float weights: y = x · Wᵀ for a few tokens, each weight read once.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// Output rows per register block of gemv_float (and the thread-split granularity).
inline constexpr std::int64_t kGemvRows = 4;

/// y[t, o] = Σ_i W[o, i] · x[t, i] for the output rows o in [row_begin, row_end) and every
/// token t < n_tokens; other columns of y are left untouched. Single-threaded (callers split
/// rows across threads).
/// w: [out, in] row-major, dtype F32, F16 or BF16, at any byte alignment. x: [n_tokens, in]
/// f32. y: [n_tokens, out] f32. Accumulates in f32.
/// Memory-bound matrix-vector product (roofline: ~1 FLOP per weight byte for F16/BF16):
/// Highway SIMD over `in`, kGemvRows rows at a time, weights widened in registers from their
/// stored dtype (F16 by F16C, BF16 by a 16-bit shift) so the matrix streams from memory once,
/// the next row block software-prefetched (hardware prefetchers stop at 4 KiB pages); up to
/// 4 tokens share each weight load, further tokens re-read the block from L1/L2. x is copied
/// to a vector-aligned per-thread buffer first (n_tokens·in floats, kept between calls).
/// Preconditions (shapes checked by the model at load time, see matmul.h): float dtype,
/// 0 <= row_begin <= row_end <= out, x.size() == n_tokens*in, y.size() == n_tokens*out.
/// Scalar reference twin: float_matmul_reference (float_matmul.h).
void gemv_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                std::span<float> y, std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

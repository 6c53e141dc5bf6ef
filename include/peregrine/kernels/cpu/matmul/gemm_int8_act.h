// y = x · Wᵀ for group-wise integer weights (DType::kInt) with act_bits 8: per-token dynamic
// int8 activations and integer dot products (SmoothQuant W8A8, W4A8), optionally with
// LLM.int8()'s f32 outlier columns.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// w: [out, in] DType::kInt with w.quant.act_bits == 8 (layout in core/dtype.h; any bits, group
/// size, symmetric or asymmetric; rows at any byte alignment). x: [n_tokens, in] f32.
/// y: [n_tokens, out] f32, overwritten with
///   y[t, o] = s_x[t] · Σ_g scale_g · (Σ_{i∈g} q_i·xq_i − zero_g · Σ_{i∈g} xq_i)
///             + Σ_{c outlier} W[o, c] · x[t, c]
/// where xq, s_x and the outlier columns come from quantize_tokens(x, …,
/// w.quant.outlier_threshold) (token_quantize.h: s_x = absmax(x_t)/127 over the non-outlier
/// columns, xq = 0 in outlier columns) and W[o, c] = scale_g · (q_c − zero_g). Each group's
/// bracket is an exact int32 dot product (Xiao et al. 2023, SmoothQuant; Dettmers et al. 2022,
/// LLM.int8() for the outlier decomposition); the rest is f32.
/// Codes are unpacked to int16 (q − zero) values (src/kernels/cpu/matmul/int_decode-inl.h) laid out
/// group by group (each group padded to a multiple of 32 values, the activations alike, so
/// every SIMD vector lies inside one group) and multiplied with Highway int16 multiply-adds into
/// int32 lanes per group, converted once per group and accumulated in f32 with the group's
/// scale. 1 token without outlier columns: each unit of codes is unpacked and multiplied in
/// registers (the decode GEMV streams the weights once); otherwise blocks of 4 rows are decoded
/// once into a buffer and reused for every token.
/// Threaded over blocks of output rows; products of fewer than `min_parallel_macs`
/// multiply-adds (matmul.h) run on the calling thread.
/// Preconditions (checked by the model at load time; matmul.h): w.dtype == kInt,
/// w.quant.valid(), w.quant.act_bits == 8, w.nbytes == out · w.row_bytes(), x finite,
/// x.size() == n_tokens·in, y.size() == n_tokens·out; not called from inside a
/// pool.parallel_for.
void gemm_int8_act(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                   std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs);

/// Scalar twin of gemm_int8_act: quantize_tokens_reference, then the formula above per token
/// and row in f64 — each group's bracket exact in int64, scale_g · bracket and the outlier
/// products W[o, c] · x[t, c] exact in f64, their sums in f64 — rounded to f32 once.
/// Same preconditions (single-threaded).
void gemm_int8_act_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                             std::span<float> y);

}  // namespace peregrine

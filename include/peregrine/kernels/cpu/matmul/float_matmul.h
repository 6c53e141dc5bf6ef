// y = x · Wᵀ for F32 / F16 / BF16 weights: picks the decode GEMV or the prefill GEMM and
// splits output rows across threads.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/dtype.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// From this many tokens on, matmul_float uses gemm_float; below, gemv_float. Measured
/// (bench/matmul_bench --only threshold, F16 5632×2048, 1 and 2 threads): the GEMV is faster
/// up to 24 tokens and even at 32, where the GEMM's first 2-vector token panel fills.
inline constexpr std::int64_t kGemmMinTokens = 32;

/// True for the dtypes matmul_float handles: F32, F16, BF16.
bool is_float_dtype(DType t);

/// True when matmul_float runs `w` over n_tokens rows as gemm_bf16_dot (gemm_bf16_dot.h): BF16
/// weights it takes, from kGemmMinTokens tokens on, in the Bf16Activations::kBf16 mode
/// (bf16_activations.h), on a CPU with AVX512_BF16. That kernel rounds x to BF16 itself; in that
/// mode matmul rounds it for every other BF16 path (matmul.h).
bool uses_bf16_dot(const TensorView& w, std::int64_t n_tokens);

/// w: [out, in] row-major F32/F16/BF16 (any byte alignment). x: [n_tokens, in] f32.
/// y: [n_tokens, out] f32 (overwritten). BF16 weights: where uses_bf16_dot, x is rounded to
/// BF16 (gemm_bf16_dot); elsewhere it is used as given. Same contract as matmul() (matmul.h): products with
/// fewer than `min_parallel_macs` multiply-adds run on the calling thread, otherwise the
/// output rows are split across `pool` in chunks that are whole kernel tiles (kGemvRows or
/// kGemmRows rows).
/// Preconditions: is_float_dtype(w.dtype), x.size() == n_tokens*in, y.size() == n_tokens*out.
void matmul_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                  std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs);

/// Scalar single-threaded reference twin of gemv_float and gemm_float (same contract: rows
/// [row_begin, row_end) of every token): one weight at a time widened to f32, dot products
/// accumulated in f32 in order of i.
void float_matmul_reference(const TensorView& w, std::span<const float> x,
                            std::int64_t n_tokens, std::span<float> y, std::int64_t row_begin,
                            std::int64_t row_end);

}  // namespace peregrine

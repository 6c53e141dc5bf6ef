// f32 activations → 8-bit blocks, the right-hand side of the integer-dot products of the ggml
// weight formats, rounded exactly as llama.cpp rounds its activations (ggml's vec_dot_type:
// Q8_0 for Q4_0 / Q5_0 / Q8_0 / IQ4_NL, Q8_1 for Q4_1 / Q5_1, Q8_K for the K-quants), so that
// both engines compute the same products from the same weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// A batch of quantized activation rows: value i of token t ≈ d[t*(in/block) + i/block] * q[t*in + i].
struct QuantizedActivations {
  std::int64_t n_tokens = 0;
  std::int64_t in = 0;          // row length, a multiple of block
  std::int64_t block = 32;      // values per scale: 32 (ggml's Q8_0) or 256 (ggml's Q8_K)
  std::vector<std::int8_t> q;   // [n_tokens, in]
  std::vector<float> d;         // [n_tokens, in / block] block scales
  std::vector<float> s;         // blocks of 32 only: [n_tokens, in / 32] Q8_1's block sums
                                // f16(amax/127 · Σq), what ggml's Q4_1 / Q5_1 dot products use
};

/// The block sizes quantize_activations makes: Q8_0's 32 (the Q8_0 / Q4_0 / legacy kernels)
/// and Q8_K's 256 (one scale per K-quant super-block, so gemm_ggml sums a whole super-block's
/// integer products before any float operation, as ggml_vec_dot_q4_K_q8_K does).
inline constexpr std::int64_t kActivationBlockQ8_0 = 32;
inline constexpr std::int64_t kActivationBlockQ8_K = 256;

/// Token counts × row length below this quantize on the calling thread (the work is ~1 ns a
/// value; waking the workers costs tens of microseconds).
inline constexpr std::int64_t kMinParallelQuantize = std::int64_t{1} << 16;

/// Quantizes x: [n_tokens, in] f32 into `out` (resized; its buffers are reused across calls).
/// Per block of `block` values (symmetric absmax RTN as ggml's x86 quantize_row_q8_0 / _q8_1 /
/// _q8_K and ggml_quantize_mat_q8_0_4x8 / _q8_K_4x8 do): q = nearest-even(x · 127/amax)
/// ∈ [-127, 127]; blocks of 32: d = amax/127 rounded to f16 (block_q8_0 stores it so) and
/// s = f16(amax/127 · Σq) (either kept f32 where f16 would overflow); blocks of 256:
/// d = 1 / (127/amax) in f32. All 0 when amax = 0.
/// |x - d*q| <= d/2 up to the f16 rounding of d (relative 2^-11) and f32 rounding.
/// SIMD (Highway); rows are split over `pool` when n_tokens*in >= min_parallel_values (0
/// forces it). Preconditions: block is kActivationBlockQ8_0 or kActivationBlockQ8_K,
/// in % block == 0, x.size() == n_tokens*in, x finite; not called from inside a
/// pool.parallel_for.
void quantize_activations(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                          QuantizedActivations& out, ThreadPool& pool,
                          std::int64_t min_parallel_values = kMinParallelQuantize,
                          std::int64_t block = kActivationBlockQ8_0);

/// Scalar twin of quantize_activations (same arithmetic, so the results are identical).
void quantize_activations_reference(std::span<const float> x, std::int64_t n_tokens,
                                    std::int64_t in, QuantizedActivations& out,
                                    std::int64_t block = kActivationBlockQ8_0);

}  // namespace peregrine

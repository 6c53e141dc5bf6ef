// The decode GEMV of BF16 weights packed at load (half_packed.h's layout: 16 rows in lanes) on
// CPUs with AVX512_BF16, for activations rounded to BF16 (Bf16Activations::kBf16,
// bf16_activations.h): per pair of columns one 64-byte load, one VPERMW that pairs each row's two
// weights, and per token one VDPBF16PS against the token's pair of activations — half the
// multiply instructions of half_packed.cpp's widen-and-FMA GEMV, which matters once several
// tokens share the weights (serving steps, token trees).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"

namespace peregrine {

/// True when gemv_bf16_dot takes `w` on this CPU: BF16 packed at load (w.packed, half_packed.h)
/// with an even row length, and the CPU has AVX512F, AVX512BW and AVX512_BF16.
bool gemv_bf16_dot_takes(const TensorView& w);

/// y_i[t, o] = Σ_j W_i[o, 2j]·bf16(x_i[t, 2j]) + W_i[o, 2j+1]·bf16(x_i[t, 2j+1]) for every product
/// i, token t < n_tokens and row o, the pairs accumulated in f32 (4 partial sums per row, added at
/// the end; denormals flushed to zero, as VDPBF16PS does). Each distinct x (by address) is
/// rounded into BF16 pairs once per call; the products' rows run side by side in one parallel
/// region, threads taking guided ranges of whole 16-row groups; per group the tokens in chunks
/// of up to 4 (the group read from memory once), the next group prefetched into L2 when a chunk
/// holds several tokens.
/// w: gemv_bf16_dot_takes. x: [n_tokens, in] f32. y: [n_tokens, out] f32 (overwritten).
/// Preconditions: n_tokens in [1, kHalfPackedTokens], the shapes of matmul (matmul.h).
/// Scalar twin: gemv_bf16_dot_reference. Instruction: Intel SDM vol. 2, VDPBF16PS.
void gemv_bf16_dot(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                   std::int64_t min_parallel_macs);

/// Scalar twin of gemv_bf16_dot for one product (any CPU): reads the packed layout; per output
/// the four partial sums of pairs j ≡ 0, 1, 2, 3 (mod 4), each pair's two products added to its
/// sum in order, then (s0 + s1) + (s2 + s3).
void gemv_bf16_dot_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y);

}  // namespace peregrine

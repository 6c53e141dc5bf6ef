// The error that 8-bit block quantization of the activations (quantize_activations) adds to a
// dot product, for tests of the Q8_0/Q4_0 matmul against the f32-activation reference.
#pragma once

#include <cstddef>
#include <span>

namespace peregrine::test {

/// Bound on |Σ w_i x_i - Σ w_i x̂_i|, x̂ = x quantized in blocks of `block` (32, or 256 for the
/// Q8_K activations of the K-quants; d = amax/127, q =
/// round(x/d)): per value |x - d q| <= d/2 = amax/254, times (1 + 1e-4) for the f32 rounding of
/// d, 1/d and x·(1/d) (each <= 2^-24 relative, on |x/d| <= 127, i.e. < 4e-5 of d/2), so
///   bound = (1 + 1e-4) · Σ_blocks b (amax_b(x) / 254) · Σ_{i in b} |w_i|.
/// w, x: one weight row and one activation row of equal length (a multiple of block).
double activation_quantization_bound(std::span<const float> w, std::span<const float> x, std::size_t block = 32);

}  // namespace peregrine::test

// Orthonormal Walsh–Hadamard transform of activation rows: the online rotation of QuaRot
// (Ashkboos et al. 2024) / SpinQuant (Liu et al. 2024) where a rotation cannot be fused into the
// weights (the SwiGLU output feeding ffn_down).
#pragma once

#include <cstdint>

namespace peregrine {

/// In place, each of the `n_rows` rows of x [n_rows, n] f32 is multiplied by the block-diagonal
/// orthonormal Hadamard matrix of size n: the row is split into power-of-two blocks by the binary
/// expansion of n, largest first (172 = 128 + 32 + 8 + 4; a power of two is one block), and each
/// block of size m is multiplied by H_m / sqrt(m), H_m Sylvester's Hadamard matrix (H_1 = [1],
/// H_2m = [[H_m, H_m], [H_m, -H_m]]). The matrix is orthogonal and symmetric, hence its own
/// inverse. Fast Walsh–Hadamard butterflies: n·log2(n) additions per row.
/// Preconditions: n_rows >= 0, n >= 1.
void hadamard_transform(float* x, std::int64_t n_rows, std::int64_t n);

/// Scalar reference twin: builds each block's ±1/sqrt(m) matrix entry by entry
/// (H_m[i][j] = (-1)^popcount(i & j)) and multiplies in f64.
void hadamard_transform_reference(float* x, std::int64_t n_rows, std::int64_t n);

}  // namespace peregrine

// Row-wise Llama building blocks: RMSNorm, RoPE, SwiGLU. Scalar f32 (they are a tiny share
// of the FLOPs; the SIMD versions come with the fast-kernel work).
#pragma once

#include <cstdint>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// RMSNorm (Zhang & Sennrich 2019): out[i] = x[i] / sqrt(mean(x²) + eps) * w[i].
/// x, w, out: [n] f32; out may alias x.
void rmsnorm(const float* x, const float* w, float* out, std::int64_t n, float eps);

/// RoPE (Su et al. 2021, RoFormer) in place on `n_heads` heads of `head_dim` f32 values at
/// position `pos`: each pair (a, b) rotates by angle pos * theta^(-2i/head_dim), i = pair
/// index. kInterleaved pairs (2i, 2i+1); kNeox pairs (i, i + head_dim/2).
void rope(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int32_t pos, float theta,
          RopeStyle style);

/// SwiGLU (Shazeer 2020): gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g). [n] f32.
void swiglu(float* gate, const float* up, std::int64_t n);

}  // namespace peregrine

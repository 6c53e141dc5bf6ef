// Row-wise Llama building blocks: RMSNorm, RoPE, SwiGLU, GeGLU (Gemma). SIMD (Highway, runtime dispatch) f32,
// each with a scalar *_reference twin the tests compare against.
#pragma once

#include <cstdint>

#include "peregrine/core/ffn_activation.h"
#include "peregrine/core/rope_style.h"

namespace peregrine {

/// RMSNorm (Zhang & Sennrich 2019): out[i] = x[i] / sqrt(mean(x²) + eps) * w[i].
/// x, w, out: [n] f32, n >= 1; out may alias x. The sum of squares accumulates in f32 vector
/// lanes (relative error <= (n / lanes + log2 lanes) · 2^-24 before the square root).
void rmsnorm(const float* x, const float* w, float* out, std::int64_t n, float eps);

/// Scalar twin of rmsnorm: sum of squares in f64.
void rmsnorm_reference(const float* x, const float* w, float* out, std::int64_t n, float eps);

/// The RoPE rotation (Su et al. 2021, RoFormer) of one position in the layout of `style`:
/// x'[j] = x[j] · cos[j] + x[partner(j)] · sin[j] over head_dim entries, where pair i (angle
/// pos · theta^(-2i/head_dim), computed in f64) is (2i, 2i+1) for kInterleaved and
/// (i, i + head_dim/2) for kNeox; the first entry of a pair carries -sin, the second +sin.
/// cos, sin: [head_dim] f32 (written); head_dim even. Compute once per position and reuse it
/// for q and k (and every layer). freq_factors: nullptr, or [head_dim / 2] f32 divisors of the
/// pairs' frequencies (scaled RoPE: angle pos · theta^(-2i/head_dim) / freq_factors[i],
/// model/spec/rope_scaling.h, llama.cpp's rope_freqs).
void rope_table(std::int32_t pos, std::int64_t head_dim, float theta, RopeStyle style,
                float* cos, float* sin, const float* freq_factors = nullptr);

/// Applies a rope_table rotation in place to `n_heads` heads of `head_dim` f32 values (SIMD).
void rope_rotate(float* x, std::int64_t n_heads, std::int64_t head_dim, const float* cos,
                 const float* sin, RopeStyle style);

/// RoPE in place on `n_heads` heads of `head_dim` f32 values at position `pos`: each pair
/// (a, b) rotates by angle pos * theta^(-2i/head_dim), i = pair index. kInterleaved pairs
/// (2i, 2i+1); kNeox pairs (i, i + head_dim/2). rope_table + rope_rotate.
void rope(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int32_t pos, float theta,
          RopeStyle style);

/// Scalar twin of rope: angles in f64 per pair, rotation (a·c - b·s, a·s + b·c) in f32.
void rope_reference(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int32_t pos,
                    float theta, RopeStyle style);

/// SwiGLU (Shazeer 2020): gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g). [n] f32.
/// SIMD with Highway's Exp (<= 1-2 ulp); e^-g is capped at e^88 so very negative g give ~0.
void swiglu(float* gate, const float* up, std::int64_t n);

/// Scalar twin of swiglu (std::exp).
void swiglu_reference(float* gate, const float* up, std::int64_t n);

/// GeGLU with the tanh-approximated GELU (Shazeer 2020; Gemma's gelu_pytorch_tanh, Hendrycks &
/// Gimpel 2016): gate[i] = gelu(gate[i]) * up[i], gelu(g) = 0.5·g·(1 + tanh(u)),
/// u = sqrt(2/π)·(g + 0.044715·g³). [n] f32. SIMD, computed as the equal g / (1 + e^-2u) (no
/// cancellation in 1 + tanh(u) for negative g), e^-2u capped at e^88 as in swiglu.
void geglu(float* gate, const float* up, std::int64_t n);

/// Scalar twin of geglu in f64, through the exact identity 1 + tanh(u) = 2 / (1 + e^-2u) (the
/// tanh form cancels to 0 for u < -19 even in f64) and without geglu's cap.
void geglu_reference(float* gate, const float* up, std::int64_t n);

/// gate[i] = act(gate[i]) * up[i] for the gated FFN activation `act` (SiLU: swiglu, GELU-tanh:
/// geglu). [n] f32.
void gated_activation(FfnActivation act, float* gate, const float* up, std::int64_t n);

}  // namespace peregrine

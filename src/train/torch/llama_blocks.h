// The differentiable pieces of a Llama decoder layer, written with libtorch ops so autograd
// gives the backward pass: RMSNorm, RoPE of either pairing with the engine's f64 angles, causal
// GQA attention, the SwiGLU FFN. The distillation student (llama_student.h) and the EAGLE head
// (eagle.cpp) are both made of them. Weights are {out, in} as in the model files.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "peregrine/formats/architecture.h"

namespace peregrine::train {

/// x / sqrt(mean(x²) + eps) · w over the last dimension.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, float eps);

/// Rotary position embedding (Su et al. 2021) as model/llama_model.cpp applies it: angles
/// pos · θ^(−2i/head_dim) in f64, cos / sin rounded to f32.
class Rope {
 public:
  Rope() = default;
  /// head_dim even; positions 0..max_len−1.
  Rope(std::int64_t head_dim, float theta, std::int64_t max_len, RopeStyle style);
  /// x [B, T, heads, head_dim] at positions 0..T−1 (T <= max_len), rotated: pairs (2i, 2i+1)
  /// for kInterleaved, (i, i + head_dim/2) — Hugging Face's rotate_half — for kNeox.
  torch::Tensor apply(const torch::Tensor& x) const;

 private:
  torch::Tensor cos_, sin_;  // [max_len, head_dim / 2]
  RopeStyle style_ = RopeStyle::kNeox;
};

/// Causal self-attention of h [B, T, dim] (row t sees rows <= t): Q/K/V projections, RoPE on Q
/// and K, scores / sqrt(head_dim), softmax, K/V heads shared by heads / kv_heads query heads,
/// output projection. wq [heads·hd, dim], wk / wv [kv_heads·hd, dim], wo [dim, heads·hd].
torch::Tensor causal_attention(const torch::Tensor& h, const torch::Tensor& wq, const torch::Tensor& wk, const torch::Tensor& wv,
                               const torch::Tensor& wo, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
                               const Rope& rope);

/// down(SiLU(gate(h)) · up(h)). gate / up [ffn, dim], down [dim, ffn].
torch::Tensor swiglu(const torch::Tensor& h, const torch::Tensor& gate, const torch::Tensor& up, const torch::Tensor& down);

}  // namespace peregrine::train

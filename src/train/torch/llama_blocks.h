// The differentiable pieces of a Llama decoder layer, written with libtorch ops so autograd
// gives the backward pass: RMSNorm, RoPE of either pairing with the engine's f64 angles, causal
// GQA attention, the SwiGLU FFN, and the whole decoder forward over them. The distillation
// student (llama_student.h), the LoRA / QLoRA fine-tuning module (lora_model.h) and the EAGLE head
// (eagle.cpp) are all made of them. Weights are {out, in} as in the model files; a projection is
// a `Linear`, so a caller can add to x·Wᵀ (LoRA's low-rank term) or make W on the fly (NF4).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "peregrine/model/spec/architecture.h"
#include "peregrine/formats/model_file.h"

namespace peregrine::train {

/// A projection: x [..., in] ↦ [..., out].
using Linear = std::function<torch::Tensor(const torch::Tensor&)>;

/// x ↦ x·wᵀ for w [out, in] (the tensor handle is kept, not copied).
Linear dense(const torch::Tensor& w);

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
/// output projection. q: dim → heads·hd, k / v: dim → kv_heads·hd, o: heads·hd → dim.
torch::Tensor causal_attention(const torch::Tensor& h, const Linear& q, const Linear& k, const Linear& v, const Linear& o,
                               std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, const Rope& rope);

/// down(SiLU(gate(h)) · up(h)). gate / up: dim → ffn, down: ffn → dim.
torch::Tensor swiglu(const torch::Tensor& h, const Linear& gate, const Linear& up, const Linear& down);

/// Where a dense Llama decoder's forward gets its weights, by canonical name
/// (formats/model_file.h): `tensor` gives the embedding, the norms and output.weight (as stored);
/// `project(name, x)` applies the layer projection `name` ("blk.L.attn_q.weight", ...) to x.
struct DecoderWeights {
  std::function<const torch::Tensor&(const std::string&)> tensor;
  std::function<torch::Tensor(const std::string&, const torch::Tensor&)> project;
};

/// Logits [B, T, vocab] f32 of `tokens` [B, T] int64 at positions 0..T−1 (T <= the rope's
/// length) through the dense Llama decoder of config `c` (check_student_support's kind) as
/// model/llama_model.cpp runs it: embedding, per layer x += attention(RMSNorm(x)),
/// x += SwiGLU(RMSNorm(x)), final RMSNorm, LM head (token_embd.weight when tied).
torch::Tensor decoder_forward(const ModelConfig& c, const Rope& rope, const DecoderWeights& w, const torch::Tensor& tokens);

}  // namespace peregrine::train

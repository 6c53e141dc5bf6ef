#include "train/torch/llama_blocks.h"

#include <cmath>
#include <vector>

namespace peregrine::train {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, float eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

Rope::Rope(std::int64_t head_dim, float theta, std::int64_t max_len, RopeStyle style) : style_(style) {
  // As rope_reference computes them: f64 θ^(−2i/head_dim) · pos, cos / sin rounded to f32.
  const std::int64_t half = head_dim / 2;
  std::vector<float> cos(static_cast<std::size_t>(max_len * half)), sin(cos.size());
  for (std::int64_t p = 0; p < max_len; ++p) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * freq;
      cos[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  cos_ = torch::tensor(cos).reshape({max_len, half});
  sin_ = torch::tensor(sin).reshape({max_len, half});
}

torch::Tensor Rope::apply(const torch::Tensor& x) const {
  const std::int64_t T = x.size(1), half = cos_.size(1);
  const torch::Tensor c = cos_.slice(0, 0, T).view({1, T, 1, half}), s = sin_.slice(0, 0, T).view({1, T, 1, half});
  if (style_ == RopeStyle::kInterleaved) {  // pairs (2i, 2i + 1)
    const torch::Tensor pairs = x.unflatten(-1, {half, 2});
    const torch::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
    return torch::stack({a * c - b * s, a * s + b * c}, -1).flatten(-2);
  }
  const torch::Tensor a = x.slice(-1, 0, half), b = x.slice(-1, half);  // NeoX: pairs (i, i + head_dim / 2)
  return torch::cat({a * c - b * s, a * s + b * c}, -1);
}

Linear dense(const torch::Tensor& w) {
  return [w](const torch::Tensor& x) { return torch::matmul(x, w.t()); };
}

torch::Tensor causal_attention(const torch::Tensor& h, const Linear& wq, const Linear& wk, const Linear& wv, const Linear& wo,
                               std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, const Rope& rope) {
  const std::int64_t B = h.size(0), T = h.size(1);
  const auto proj = [&](const Linear& w, std::int64_t n) { return w(h).view({B, T, n, head_dim}); };
  const torch::Tensor q = rope.apply(proj(wq, heads)).transpose(1, 2);  // [B, H, T, hd]
  const torch::Tensor k = rope.apply(proj(wk, kv_heads)).transpose(1, 2).repeat_interleave(heads / kv_heads, 1);
  const torch::Tensor v = proj(wv, kv_heads).transpose(1, 2).repeat_interleave(heads / kv_heads, 1);
  const torch::Tensor causal = torch::ones({T, T}, torch::kBool).triu(1);
  const torch::Tensor scores =
      (torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim))).masked_fill(causal, -INFINITY);
  const torch::Tensor out = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, heads * head_dim});
  return wo(out);
}

torch::Tensor swiglu(const torch::Tensor& h, const Linear& gate, const Linear& up, const Linear& down) {
  return down(torch::silu(gate(h)) * up(h));
}

torch::Tensor decoder_forward(const ModelConfig& c, const Rope& rope, const DecoderWeights& w, const torch::Tensor& tokens) {
  const auto norm = [&](const torch::Tensor& x, const std::string& name) { return rms_norm(x, w.tensor(name), c.rms_eps); };
  const auto linear = [&](std::int64_t l, const char* name) -> Linear {
    return [&w, name = layer_tensor_name(l, name)](const torch::Tensor& x) { return w.project(name, x); };
  };
  torch::Tensor x = w.tensor("token_embd.weight").index_select(0, tokens.flatten()).view({tokens.size(0), tokens.size(1), c.dim});
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    x = x + causal_attention(norm(x, layer_tensor_name(l, "attn_norm")), linear(l, "attn_q"), linear(l, "attn_k"), linear(l, "attn_v"),
                             linear(l, "attn_output"), c.n_heads, c.n_kv_heads, c.head_dim, rope);
    x = x + swiglu(norm(x, layer_tensor_name(l, "ffn_norm")), linear(l, "ffn_gate"), linear(l, "ffn_up"), linear(l, "ffn_down"));
  }
  const torch::Tensor& head = w.tensor(c.tied_embeddings ? "token_embd.weight" : "output.weight");
  return torch::matmul(norm(x, "output_norm.weight"), head.t());
}

}  // namespace peregrine::train

#include "train/torch/llama_student.h"

#include <cmath>
#include <set>

namespace peregrine::train {
namespace {

// The canonical tensors of a dense Llama of config c.
std::set<std::string> expected_names(const ModelConfig& c) {
  std::set<std::string> names{"token_embd.weight", "output_norm.weight"};
  if (!c.tied_embeddings) names.insert("output.weight");
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    for (const char* t : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}) {
      names.insert(layer_tensor_name(l, t));
    }
  }
  return names;
}

}  // namespace

Status check_student_support_impl(const FloatModel& m) {
  const ModelConfig& c = m.config();
  const auto refuse = [](const std::string& what) {
    return unsupported("training covers dense Llama-style models; this one has " + what);
  };
  if (c.n_experts > 0) return refuse("Mixture-of-Experts layers");
  if (c.activation != FfnActivation::kSilu) return refuse("a GeGLU FFN");
  if (c.sliding_window > 0) return refuse("a sliding attention window");
  if (c.attn_softcap != 0.0f || c.final_softcap != 0.0f) return refuse("soft-capped logits");
  if (c.attn_scale != 0.0f || c.embed_scale != 0.0f || c.norm_weight_offset != 0.0f) {
    return refuse("Gemma-style score / embedding / norm scales");
  }
  if (c.rope_scaling.kind != RopeScaling::Kind::kNone) return refuse("scaled RoPE");
  if (c.ffn_down_hadamard) return refuse("an online Hadamard rotation before ffn_down");
  const std::set<std::string> expected = expected_names(c);
  for (const std::string& name : m.names()) {
    if (expected.count(name) == 0) return refuse("tensor " + name);
  }
  for (const std::string& name : expected) {
    if (!m.has(name)) return invalid_argument("the model lacks tensor " + name);
  }
  return Status::ok();
}

Expected<LlamaStudent> LlamaStudent::from(const FloatModel& m) {
  PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(m));
  std::map<std::string, torch::Tensor> w;
  for (const std::string& name : m.names()) {
    const auto values = m.tensor(name);
    w[name] = torch::from_blob(const_cast<float*>(values.data()), m.shape(name), torch::kFloat32).clone().requires_grad_(true);
  }
  return LlamaStudent(m.config(), std::move(w));
}

LlamaStudent::LlamaStudent(ModelConfig c, std::map<std::string, torch::Tensor> w) : config_(std::move(c)), weights_(std::move(w)) {
  // RoPE angles as rope_reference computes them: f64 θ^(−2i/head_dim) · pos, cos / sin rounded to f32.
  const std::int64_t half = config_.head_dim / 2, n = config_.max_seq_len;
  std::vector<float> cos(static_cast<std::size_t>(n * half)), sin(cos.size());
  for (std::int64_t p = 0; p < n; ++p) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(config_.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(config_.head_dim));
      const double angle = static_cast<double>(p) * freq;
      cos[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  cos_ = torch::tensor(cos).reshape({n, half});
  sin_ = torch::tensor(sin).reshape({n, half});
}

std::vector<torch::Tensor> LlamaStudent::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : weights_) out.push_back(t);
  return out;
}

void LlamaStudent::write_to(FloatModel& m) const {
  const torch::NoGradGuard no_grad;
  for (const auto& [name, t] : weights_) {
    const torch::Tensor c = t.detach().contiguous();
    const auto dst = m.tensor(name);
    std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), dst.begin());
  }
}

torch::Tensor LlamaStudent::rms_norm(const torch::Tensor& x, const std::string& weight) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + config_.rms_eps) * w(weight);
}

torch::Tensor LlamaStudent::rope(const torch::Tensor& x, std::int64_t T) const {
  const std::int64_t half = config_.head_dim / 2;
  const torch::Tensor c = cos_.slice(0, 0, T).view({1, T, 1, half}), s = sin_.slice(0, 0, T).view({1, T, 1, half});
  torch::Tensor a, b;
  if (config_.rope_style == RopeStyle::kInterleaved) {  // pairs (2i, 2i + 1)
    const torch::Tensor pairs = x.unflatten(-1, {half, 2});
    a = pairs.select(-1, 0);
    b = pairs.select(-1, 1);
    return torch::stack({a * c - b * s, a * s + b * c}, -1).flatten(-2);
  }
  a = x.slice(-1, 0, half);  // NeoX: pairs (i, i + head_dim / 2)
  b = x.slice(-1, half);
  return torch::cat({a * c - b * s, a * s + b * c}, -1);
}

torch::Tensor LlamaStudent::attention(const torch::Tensor& h, std::int64_t l) const {
  const std::int64_t B = h.size(0), T = h.size(1), hd = config_.head_dim;
  const std::int64_t H = config_.n_heads, KV = config_.n_kv_heads;
  const auto proj = [&](const char* name, std::int64_t heads) {
    return torch::matmul(h, w(layer_tensor_name(l, name)).t()).view({B, T, heads, hd});
  };
  const torch::Tensor q = rope(proj("attn_q", H), T).transpose(1, 2);  // [B, H, T, hd]
  const torch::Tensor k = rope(proj("attn_k", KV), T).transpose(1, 2).repeat_interleave(H / KV, 1);
  const torch::Tensor v = proj("attn_v", KV).transpose(1, 2).repeat_interleave(H / KV, 1);
  const torch::Tensor causal = torch::ones({T, T}, torch::kBool).triu(1);
  const torch::Tensor scores = (torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd))).masked_fill(causal, -INFINITY);
  const torch::Tensor out = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, H * hd});
  return torch::matmul(out, w(layer_tensor_name(l, "attn_output")).t());
}

torch::Tensor LlamaStudent::ffn(const torch::Tensor& h, std::int64_t l) const {
  const torch::Tensor gate = torch::matmul(h, w(layer_tensor_name(l, "ffn_gate")).t());
  const torch::Tensor up = torch::matmul(h, w(layer_tensor_name(l, "ffn_up")).t());
  return torch::matmul(torch::silu(gate) * up, w(layer_tensor_name(l, "ffn_down")).t());
}

torch::Tensor LlamaStudent::forward(const torch::Tensor& tokens) const {
  torch::Tensor x = w("token_embd.weight").index_select(0, tokens.flatten()).view({tokens.size(0), tokens.size(1), config_.dim});
  for (std::int64_t l = 0; l < config_.n_layers; ++l) {
    x = x + attention(rms_norm(x, layer_tensor_name(l, "attn_norm")), l);
    x = x + ffn(rms_norm(x, layer_tensor_name(l, "ffn_norm")), l);
  }
  const torch::Tensor& head = config_.tied_embeddings ? w("token_embd.weight") : w("output.weight");
  return torch::matmul(rms_norm(x, "output_norm.weight"), head.t());
}

}  // namespace peregrine::train

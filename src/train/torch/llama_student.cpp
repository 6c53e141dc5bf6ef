#include "train/torch/llama_student.h"

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

LlamaStudent::LlamaStudent(ModelConfig c, std::map<std::string, torch::Tensor> w)
    : config_(std::move(c)),
      weights_(std::move(w)),
      rope_(config_.head_dim, config_.rope_theta, config_.max_seq_len, config_.rope_style) {}

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

torch::Tensor LlamaStudent::forward(const torch::Tensor& tokens) const {
  const DecoderWeights w{[this](const std::string& name) -> const torch::Tensor& { return weights_.at(name); },
                         [this](const std::string& name, const torch::Tensor& x) { return torch::matmul(x, weights_.at(name).t()); }};
  return decoder_forward(config_, rope_, w, tokens);
}

}  // namespace peregrine::train

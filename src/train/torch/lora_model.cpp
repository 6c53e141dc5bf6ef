#include "train/torch/lora_model.h"

#include <cmath>

#include "train/torch/frozen_target.h"
#include "train/torch/llama_student.h"

namespace peregrine::train {
namespace {

constexpr const char* kProjections[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

bool is_projection(const std::string& name) {
  for (const char* p : kProjections) {
    if (name.starts_with("blk.") && name.ends_with(std::string(".") + p + ".weight")) return true;
  }
  return false;
}

torch::Tensor view_of(const FloatModel& m, const std::string& name) {
  const auto v = m.tensor(name);
  return torch::from_blob(const_cast<float*>(v.data()), m.shape(name), torch::kFloat32);
}

}  // namespace

LoraAdapter initial_lora_adapter(const FloatModel& base, const std::vector<std::string>& tensors, std::int64_t rank, float alpha) {
  const ModelConfig& c = base.config();
  LoraAdapter a;
  a.rank = rank;
  a.alpha = alpha;
  a.arch = c.arch;
  a.rope_style = c.rope_style;
  a.head_dim = c.head_dim;
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    for (const std::string& t : tensors) {
      const std::string name = layer_tensor_name(l, t);
      LoraPair p;
      p.rank = rank;
      p.out = base.shape(name)[0];
      p.in = base.shape(name)[1];
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.in));  // kaiming_uniform_(a = √5)
      p.a = values_of(torch::rand({rank, p.in}) * (2.0 * bound) - bound);
      p.b.assign(static_cast<std::size_t>(p.out * rank), 0.0f);
      a.tensors[name] = std::move(p);
    }
  }
  return a;
}

Expected<LoraModel> LoraModel::create(const FloatModel& base, const LoraAdapter& adapter, bool nf4) {
  PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(base));
  const ModelConfig& c = base.config();
  if (adapter.rank < 1) return invalid_argument("the LoRA adapter's rank is " + std::to_string(adapter.rank) + " (must be >= 1)");
  if (adapter.rope_style != c.rope_style) return invalid_argument("the LoRA adapter's Q/K rows are not in the base's RoPE pairing");
  LoraModel m;
  m.config_ = c;
  m.rope_ = Rope(c.head_dim, c.rope_theta, c.max_seq_len, c.rope_style);
  m.layout_ = adapter;
  m.scale_ = adapter.scale();
  std::int64_t stored_bits = 0, weights = 0;
  for (const std::string& name : base.names()) {
    if (!nf4 || !is_projection(name)) {
      m.frozen_[name] = view_of(base, name);
      continue;
    }
    PEREGRINE_ASSIGN_OR_RETURN(const Nf4Tensor q, nf4_quantize(base.tensor(name), base.shape(name)));
    stored_bits += static_cast<std::int64_t>(std::llround(q.bits_per_weight() * static_cast<double>(q.numel)));
    weights += q.numel;
    m.nf4_.emplace(name, Nf4Weight::from(q));
  }
  if (nf4 && weights > 0) m.bits_per_weight_ = static_cast<double>(stored_bits) / static_cast<double>(weights);
  for (const auto& [name, p] : adapter.tensors) {
    if (!is_projection(name) || !base.has(name)) {
      return invalid_argument("LoRA tensor " + name + " adapts no projection of the base (attention or dense FFN weights only)");
    }
    const std::vector<std::int64_t>& shape = base.shape(name);
    if (p.rank != adapter.rank || p.out != shape[0] || p.in != shape[1] || p.a.size() != static_cast<std::size_t>(p.rank * p.in) ||
        p.b.size() != static_cast<std::size_t>(p.out * p.rank)) {
      return invalid_argument("LoRA tensor " + name + " is not A [" + std::to_string(adapter.rank) + ", " + std::to_string(shape[1]) +
                              "] and B [" + std::to_string(shape[0]) + ", " + std::to_string(adapter.rank) + "]");
    }
    m.pairs_[name] = {torch::tensor(p.a).reshape({p.rank, p.in}).requires_grad_(true),
                      torch::tensor(p.b).reshape({p.out, p.rank}).requires_grad_(true)};
    m.layout_.tensors[name].a.clear();
    m.layout_.tensors[name].b.clear();
  }
  return m;
}

torch::Tensor LoraModel::project(const std::string& name, const torch::Tensor& x) const {
  const auto q = nf4_.find(name);
  torch::Tensor y = q != nf4_.end() ? q->second.project(x) : torch::matmul(x, frozen_.at(name).t());
  if (const auto p = pairs_.find(name); p != pairs_.end()) {
    y = y + torch::matmul(torch::matmul(x, p->second.a.t()), p->second.b.t()) * scale_;
  }
  return y;
}

torch::Tensor LoraModel::forward(const torch::Tensor& tokens) const {
  const DecoderWeights w{[this](const std::string& name) -> const torch::Tensor& { return frozen_.at(name); },
                         [this](const std::string& name, const torch::Tensor& x) { return project(name, x); }};
  return decoder_forward(config_, rope_, w, tokens);
}

std::vector<torch::Tensor> LoraModel::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : pairs_) {
    out.push_back(p.a);
    out.push_back(p.b);
  }
  return out;
}

LoraAdapter LoraModel::adapter() const {
  LoraAdapter a = layout_;
  for (const auto& [name, p] : pairs_) {
    a.tensors[name].a = values_of(p.a);
    a.tensors[name].b = values_of(p.b);
  }
  return a;
}

}  // namespace peregrine::train

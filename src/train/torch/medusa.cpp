// train/medusa.h's train_medusa: Medusa-1 heads on the frozen target, through libtorch.
#include "train/torch/medusa_impl.h"

#include "train/torch/frozen_target.h"
#include "train/torch/training_steps.h"

namespace peregrine::train {
namespace {

std::string block(std::int64_t k, std::int64_t j) { return std::to_string(k) + "." + std::to_string(j) + "."; }

// The heads' trainable ResBlocks (zero at the start) and the frozen LM head.
struct Heads {
  std::vector<std::vector<torch::Tensor>> w, b;  // [head][layer]
  torch::Tensor lm_head;

  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> p;
    for (std::size_t k = 0; k < w.size(); ++k) {
      p.insert(p.end(), w[k].begin(), w[k].end());
      p.insert(p.end(), b[k].begin(), b[k].end());
    }
    return p;
  }

  // Σ_k decay^k · CE(head k's logits at t, token t + k + 2) over the positions that have one;
  // features [B, T, dim] (after the target's final norm).
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& tokens, float decay) const {
    const std::int64_t T = tokens.size(1), V = lm_head.size(0);
    torch::Tensor total = torch::zeros({});
    for (std::size_t k = 0; k < w.size(); ++k) {
      torch::Tensor y = x;
      for (std::size_t j = 0; j < w[k].size(); ++j) y = y + torch::silu(torch::matmul(y, w[k][j].t()) + b[k][j]);
      const auto shift = static_cast<std::int64_t>(k) + 2;
      const torch::Tensor logits = torch::matmul(y.slice(1, 0, T - shift), lm_head.t()).reshape({-1, V});
      const torch::Tensor target = tokens.slice(1, shift).reshape({-1});
      total = total + std::pow(decay, static_cast<double>(k)) * torch::nn::functional::cross_entropy(logits, target);
    }
    return total;
  }
};

Heads initial_heads(const FloatModel& target, const MedusaOptions& o) {
  const ModelConfig& c = target.config();
  Heads h;
  h.lm_head = lm_head_of(target);
  h.w.resize(static_cast<std::size_t>(o.heads));
  h.b.resize(static_cast<std::size_t>(o.heads));
  for (std::int64_t k = 0; k < o.heads; ++k) {
    for (std::int64_t j = 0; j < o.head_layers; ++j) {
      h.w[static_cast<std::size_t>(k)].push_back(torch::zeros({c.dim, c.dim}).requires_grad_(true));
      h.b[static_cast<std::size_t>(k)].push_back(torch::zeros({c.dim}).requires_grad_(true));
    }
  }
  return h;
}

MedusaHeads published(const Heads& h, const FloatModel& target, const MedusaOptions& o) {
  MedusaHeads m;
  m.heads = o.heads;
  m.layers = o.head_layers;
  m.hidden = target.config().dim;
  m.vocab = target.config().vocab_size;
  m.base_model = target.source().path;
  for (std::int64_t k = 0; k < o.heads; ++k) {
    for (std::int64_t j = 0; j < o.head_layers; ++j) {
      m.tensors[block(k, j) + "linear.weight"] = values_of(h.w[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)]);
      m.tensors[block(k, j) + "linear.bias"] = values_of(h.b[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)]);
    }
    m.tensors[block(k, o.head_layers) + "weight"] = values_of(h.lm_head);
  }
  return m;
}

}  // namespace

Expected<MedusaHeads> train_medusa_impl(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                        std::int32_t bos, const MedusaOptions& o, ThreadPool& pool, MedusaReport* report,
                                        const DistillProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  PEREGRINE_RETURN_IF_ERROR(start_head_run(target_f32, o.seq, text.size(), o.seed, pool));
  Heads heads = initial_heads(target_f32, o);
  torch::optim::AdamW opt(heads.parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(0.0));
  const auto loss_of = [&](std::int64_t step) -> Expected<torch::Tensor> {
    const torch::Tensor tokens = text_windows(text, bos, o.batch, o.seq, o.seed, step);
    PEREGRINE_ASSIGN_OR_RETURN(const torch::Tensor features, target_features_batch(target, tokens, pool));
    return heads.loss(features, tokens, o.decay);
  };
  PEREGRINE_ASSIGN_OR_RETURN(const StepsDone done, run_steps(opt, o.lr, o.warmup, o.steps, o.batch * o.seq, loss_of, progress));
  if (report != nullptr) *report = {o.steps, done.log.first(), done.log.last(), done.seconds};
  return published(heads, target_f32, o);
}

}  // namespace peregrine::train

// train/medusa.h's train_medusa: Medusa-1 heads on the frozen target, through libtorch.
#include "train/torch/medusa_impl.h"

#include <chrono>

#include "peregrine/eval/eval_windows.h"
#include "peregrine/model/activation_observer.h"
#include "train/torch/llama_student.h"
#include "train/torch/training_steps.h"

namespace peregrine::train {
namespace {

// The residual stream after the last block of one forward (before the final norm).
class FinalHidden final : public ActivationObserver {
 public:
  explicit FinalHidden(std::int64_t n_layers) : n_layers_(n_layers) {}
  void observe(std::int64_t, LinearInput, std::span<const float>, std::int64_t) override {}
  void observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t) override {
    if (layer == n_layers_) h_.assign(h.begin(), h.end());
  }
  const std::vector<float>& values() const { return h_; }

 private:
  std::int64_t n_layers_;
  std::vector<float> h_;
};

// The target's final hidden states [batch, seq, dim] of `tokens`, from Peregrine's forward.
Expected<torch::Tensor> target_hidden(const LlamaModel& target, const torch::Tensor& tokens, ThreadPool& pool) {
  const ModelConfig& c = target.config();
  const std::int64_t B = tokens.size(0), T = tokens.size(1);
  torch::Tensor out = torch::empty({B, T, c.dim}, torch::kFloat32);
  const auto ids = tokens.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(c, T, DType::kF32));
    Batch batch;
    for (std::int64_t i = 0; i < T; ++i) batch.add(static_cast<std::int32_t>(ids[b][i]), static_cast<std::int32_t>(i), 0, i == T - 1);
    FinalHidden hidden(c.n_layers);
    std::vector<float> logits;
    PEREGRINE_RETURN_IF_ERROR(target.forward(batch, cache, logits, pool, 0, &hidden));
    std::copy(hidden.values().begin(), hidden.values().end(), out[b].data_ptr<float>());
  }
  return out;
}

torch::Tensor tensor_of(const FloatModel& m, const std::string& name) {
  const auto v = m.tensor(name);
  return torch::from_blob(const_cast<float*>(v.data()), m.shape(name), torch::kFloat32).clone();
}

std::string block(std::int64_t k, std::int64_t j) { return std::to_string(k) + "." + std::to_string(j) + "."; }

// The heads' trainable ResBlocks (zero at the start) and the frozen norm and LM head.
struct Heads {
  std::vector<std::vector<torch::Tensor>> w, b;  // [head][layer]
  torch::Tensor norm, lm_head;
  float eps = 1e-5f;

  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> p;
    for (std::size_t k = 0; k < w.size(); ++k) {
      p.insert(p.end(), w[k].begin(), w[k].end());
      p.insert(p.end(), b[k].begin(), b[k].end());
    }
    return p;
  }

  // Σ_k decay^k · CE(head k's logits at t, token t + k + 2) over the positions that have one.
  torch::Tensor loss(const torch::Tensor& hidden, const torch::Tensor& tokens, float decay) const {
    const std::int64_t T = tokens.size(1), V = lm_head.size(0);
    const torch::Tensor x = hidden * torch::rsqrt(hidden.pow(2).mean(-1, true) + eps) * norm;
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
  h.norm = tensor_of(target, "output_norm.weight");
  h.lm_head = tensor_of(target, c.tied_embeddings ? "token_embd.weight" : "output.weight");
  h.eps = c.rms_eps;
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

std::vector<float> values_of(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
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
  PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(target_f32));
  if (o.seq > target.config().max_seq_len) {
    return invalid_argument("--seq " + std::to_string(o.seq) + " is longer than the target's context (" +
                            std::to_string(target.config().max_seq_len) + ")");
  }
  if (static_cast<std::int64_t>(text.size()) < o.seq + 1) {
    return invalid_argument("the training text holds " + std::to_string(text.size()) + " tokens, fewer than --seq + 1 = " +
                            std::to_string(o.seq + 1));
  }
  torch::manual_seed(o.seed);
  torch::set_num_threads(static_cast<int>(pool.n_threads()));
  Heads heads = initial_heads(target_f32, o);
  torch::optim::AdamW opt(heads.parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(0.0));
  const auto t0 = std::chrono::steady_clock::now();
  LossLog log;
  std::int64_t tokens_done = 0;
  for (std::int64_t step = 0; step < o.steps; ++step) {
    for (auto& group : opt.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(cosine_learning_rate(o.lr, o.warmup, o.steps, step));
    }
    const torch::Tensor tokens = text_windows(text, bos, o.batch, o.seq, o.seed, step);
    PEREGRINE_ASSIGN_OR_RETURN(const torch::Tensor hidden, target_hidden(target, tokens, pool));
    const torch::Tensor loss = heads.loss(hidden, tokens, o.decay);
    opt.zero_grad();
    loss.backward();
    opt.step();
    log.losses.push_back(loss.item<double>());
    tokens_done += o.batch * o.seq;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress(step + 1, o.steps, log.losses.back(), static_cast<double>(tokens_done) / std::max(seconds, 1e-9));
  }
  if (report != nullptr) {
    *report = {o.steps, log.first(), log.last(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  }
  return published(heads, target_f32, o);
}

}  // namespace peregrine::train

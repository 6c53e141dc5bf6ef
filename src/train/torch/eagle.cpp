// train/eagle.h's train_eagle and eagle_reference: the EAGLE-1 head as a libtorch module (the
// layer pieces of llama_blocks.h), trained on the frozen target's features.
#include "train/torch/eagle_impl.h"

#include <cmath>

#include "train/torch/frozen_target.h"
#include "train/torch/llama_blocks.h"
#include "train/torch/llama_student.h"
#include "train/torch/training_steps.h"

namespace peregrine::train {
namespace {

std::string layer(const char* rest) { return std::string("layers.0.") + rest; }

// The head's dimensions for `target` (spec/eagle_head.h), no tensors yet.
EagleHead head_shape(const FloatModel& target, bool bias) {
  EagleHead h = eagle_head_shape(target.config());
  h.bias = bias;
  h.base_model = target.source().path;
  return h;
}

// PyTorch's nn.Linear initialization (kaiming_uniform_ with a = sqrt(5): U(±1/sqrt(fan_in)) for
// the weight, the same bound for the bias), LlamaRMSNorm's (ones), from libtorch's seeded generator.
void initialize(EagleHead& h) {
  for (const std::string& name : h.names()) {
    const std::vector<std::int64_t> shape = h.shape(name);
    torch::Tensor t;
    if (name == layer("post_attention_layernorm.weight")) {
      t = torch::ones(shape);
    } else {
      const std::int64_t fan_in = name == "fc.bias" ? 2 * h.hidden : shape.back();
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      t = torch::rand(shape) * (2.0 * bound) - bound;
    }
    h.tensors[name] = values_of(t);
  }
}

// The head as torch tensors (trainable or not) beside the target's frozen embedding and LM head.
class EagleModule {
 public:
  static Expected<EagleModule> from(const EagleHead& h, const FloatModel& target) {
    PEREGRINE_RETURN_IF_ERROR(check_student_support_impl(target));
    const ModelConfig& c = target.config();
    if (h.hidden != c.dim || h.vocab != c.vocab_size) {
      return invalid_argument("the EAGLE head is for hidden size " + std::to_string(h.hidden) + " and " + std::to_string(h.vocab) +
                              " tokens; the target has " + std::to_string(c.dim) + " and " + std::to_string(c.vocab_size));
    }
    if (h.heads < 1 || h.kv_heads < 1 || h.heads % h.kv_heads != 0 || h.head_dim < 2 || h.head_dim % 2 != 0 || h.max_positions < 1) {
      return invalid_argument("the EAGLE head's attention dimensions do not fit together");
    }
    EagleModule m;
    m.head_ = h;
    m.head_.tensors.clear();
    for (const std::string& name : h.names()) {
      const auto it = h.tensors.find(name);
      std::int64_t n = 1;
      for (std::int64_t d : h.shape(name)) n *= d;
      if (it == h.tensors.end() || static_cast<std::int64_t>(it->second.size()) != n) {
        return invalid_argument("the EAGLE head's tensor " + name + " is missing or not " + std::to_string(n) + " values");
      }
      m.w_[name] = torch::tensor(it->second).reshape(h.shape(name)).requires_grad_(true);
    }
    m.embed_ = tensor_of(target, "token_embd.weight");
    m.lm_head_ = lm_head_of(target);
    m.rope_ = Rope(h.head_dim, h.rope_theta, h.max_positions, RopeStyle::kNeox);  // HF rotate_half, as cnets.py
    return m;
  }

  // f̂ [B, T, d] of the features [B, T, d] f_0..f_{T−1} and the next tokens [B, T] int64 x_1..x_T.
  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& next_tokens) const {
    const std::int64_t B = features.size(0), T = features.size(1), d = head_.hidden;
    const torch::Tensor embedded = embed_.index_select(0, next_tokens.flatten()).view({B, T, d});
    torch::Tensor h = torch::matmul(torch::cat({embedded, features}, -1), w("fc.weight").t());
    if (head_.bias) h = h + w("fc.bias");
    const auto proj = [&](const char* name) { return dense(w(layer(name))); };
    h = h + causal_attention(h, proj("self_attn.q_proj.weight"), proj("self_attn.k_proj.weight"), proj("self_attn.v_proj.weight"),
                             proj("self_attn.o_proj.weight"), head_.heads, head_.kv_heads, head_.head_dim, rope_);
    return h + swiglu(rms_norm(h, w(layer("post_attention_layernorm.weight")), head_.rms_eps), proj("mlp.gate_proj.weight"),
                      proj("mlp.up_proj.weight"), proj("mlp.down_proj.weight"));
  }

  torch::Tensor logits(const torch::Tensor& features) const { return torch::matmul(features, lm_head_.t()); }

  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> out;
    for (const std::string& name : head_.names()) out.push_back(w_.at(name));
    return out;
  }

  // The trained head with the target's embedding (published checkpoints carry it).
  EagleHead published() const {
    EagleHead h = head_;
    for (const auto& [name, t] : w_) h.tensors[name] = values_of(t);
    h.tensors["embed_tokens.weight"] = values_of(embed_);
    return h;
  }

  const EagleHead& head() const { return head_; }

 private:
  const torch::Tensor& w(const std::string& name) const { return w_.at(name); }

  EagleHead head_;  // dimensions only
  std::map<std::string, torch::Tensor> w_;
  torch::Tensor embed_, lm_head_;
  Rope rope_;
};

// One step's loss (eagle/train/main.py) and the top-1 agreement of its rows.
struct StepLoss {
  torch::Tensor loss;
  double accuracy = 0.0;
};

StepLoss eagle_loss(const EagleModule& m, const torch::Tensor& features, const torch::Tensor& tokens, const EagleOptions& o) {
  const std::int64_t S = tokens.size(1);
  torch::Tensor in = features.slice(1, 0, S - 1);
  if (o.noise > 0.0f) in = in + (torch::rand_like(in) - 0.5) * (o.noise * 512.0 / static_cast<double>(S));  // AddUniformNoise
  const torch::Tensor target = features.slice(1, 1, S);
  const torch::Tensor predicted = m.forward(in, tokens.slice(1, 1, S));
  const torch::Tensor regression =
      torch::nn::functional::smooth_l1_loss(predicted, target, torch::nn::functional::SmoothL1LossFuncOptions().reduction(torch::kNone))
          .mean(-1)
          .mean();
  torch::Tensor target_logits;
  {
    const torch::NoGradGuard no_grad;
    target_logits = m.logits(target);
  }
  const torch::Tensor logits = m.logits(predicted);
  const torch::Tensor classification = -(torch::softmax(target_logits, -1) * torch::log_softmax(logits, -1)).sum(-1).mean();
  const double accuracy = logits.argmax(-1).eq(target_logits.argmax(-1)).to(torch::kFloat64).mean().item<double>();
  return {o.reg_weight * regression + o.cls_weight * classification, accuracy};
}

}  // namespace

Expected<EagleHead> train_eagle_impl(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                     std::int32_t bos, const EagleOptions& o, ThreadPool& pool, EagleReport* report,
                                     const DistillProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  PEREGRINE_RETURN_IF_ERROR(start_head_run(target_f32, o.seq, text.size(), o.seed, pool));
  EagleHead initial = head_shape(target_f32, o.bias);
  initialize(initial);
  PEREGRINE_ASSIGN_OR_RETURN(const EagleModule module, EagleModule::from(initial, target_f32));
  const std::vector<torch::Tensor> params = module.parameters();
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(0.01));
  std::vector<double> accuracy;
  const auto loss_of = [&](std::int64_t step) -> Expected<torch::Tensor> {
    const torch::Tensor tokens = text_windows(text, bos, o.batch, o.seq, o.seed, step);
    PEREGRINE_ASSIGN_OR_RETURN(const torch::Tensor features, target_features_batch(target, tokens, pool));
    StepLoss l = eagle_loss(module, features, tokens, o);
    accuracy.push_back(l.accuracy);
    return l.loss;
  };
  const auto clip = [&] {
    if (o.grad_clip > 0.0f) torch::nn::utils::clip_grad_value_(params, o.grad_clip);
  };
  PEREGRINE_ASSIGN_OR_RETURN(const StepsDone done, run_steps(opt, o.lr, o.warmup, o.steps, o.batch * o.seq, loss_of, progress, clip));
  if (report != nullptr) {
    const LossLog acc{accuracy};
    *report = {o.steps, done.log.first(), done.log.last(), acc.last(), done.seconds};
  }
  return module.published();
}

Expected<EagleReferenceOutput> eagle_reference_impl(const EagleHead& head, const FloatModel& target_f32,
                                                    std::span<const std::int32_t> tokens, std::span<const float> features) {
  PEREGRINE_ASSIGN_OR_RETURN(const EagleModule module, EagleModule::from(head, target_f32));
  const auto T = static_cast<std::int64_t>(tokens.size()) - 1;
  if (T < 1 || T > head.max_positions || static_cast<std::int64_t>(features.size()) != T * head.hidden) {
    return invalid_argument("eagle_reference: give T + 1 tokens and [T, " + std::to_string(head.hidden) + "] features, 1 <= T <= " +
                            std::to_string(head.max_positions) + " (got " + std::to_string(tokens.size()) + " tokens and " +
                            std::to_string(features.size()) + " values)");
  }
  std::vector<std::int64_t> next(tokens.begin() + 1, tokens.end());
  for (std::int64_t id : next) {
    if (id < 0 || id >= head.vocab) return invalid_argument("eagle_reference: token " + std::to_string(id) + " is outside the vocabulary");
  }
  const torch::NoGradGuard no_grad;
  const torch::Tensor f = torch::from_blob(const_cast<float*>(features.data()), {1, T, head.hidden}, torch::kFloat32).clone();
  const torch::Tensor predicted = module.forward(f, torch::tensor(next).view({1, T}));
  return EagleReferenceOutput{T, values_of(predicted), values_of(module.logits(predicted))};
}

}  // namespace peregrine::train

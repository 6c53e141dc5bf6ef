// train/finetune.h's finetune and lora_reference_logits: LoRA / QLoRA on the frozen base
// (lora_model.h), trained by the shared step loop (training_steps.h).
#include "train/torch/finetune_impl.h"

#include <cmath>

#include "peregrine/eval/eval_windows.h"
#include "train/torch/frozen_target.h"
#include "train/torch/lora_model.h"
#include "train/torch/training_steps.h"

namespace peregrine::train {
namespace {

Status check_tokens(std::span<const std::int32_t> tokens, std::int64_t vocab, const char* what) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return invalid_argument(std::string(what) + ": token " + std::to_string(i) + " (" + std::to_string(tokens[i]) +
                              ") is outside the vocabulary of " + std::to_string(vocab));
    }
  }
  return Status::ok();
}

torch::Tensor ids_of(std::span<const std::int32_t> tokens) {
  return torch::tensor(std::vector<std::int64_t>(tokens.begin(), tokens.end())).view({1, -1});
}

// Mean next-token cross-entropy (nats) of `tokens` [B, T] over every position but the last.
torch::Tensor causal_lm_loss(const LoraModel& m, const torch::Tensor& tokens) {
  const torch::Tensor logits = m.forward(tokens);
  const std::int64_t T = tokens.size(1), V = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.slice(1, 0, T - 1).reshape({-1, V}), tokens.slice(1, 1, T).reshape({-1}));
}

struct HeldOut {
  std::int64_t tokens = 0;
  double ppl = 0.0;
};

// Perplexity over windows of `seq` tokens of `text` each token scored once (plan_windows with
// stride = seq), log-softmax in f64.
Expected<HeldOut> held_out_perplexity(const LoraModel& m, std::span<const std::int32_t> text, std::int64_t seq) {
  PEREGRINE_ASSIGN_OR_RETURN(const std::vector<EvalWindow> windows, plan_windows(static_cast<std::int64_t>(text.size()), seq, seq));
  const torch::NoGradGuard no_grad;
  double nll = 0.0;
  HeldOut out;
  for (const EvalWindow& w : windows) {
    const auto slice = text.subspan(static_cast<std::size_t>(w.begin), static_cast<std::size_t>(w.end - w.begin));
    const torch::Tensor logp = torch::log_softmax(m.forward(ids_of(slice))[0].to(torch::kFloat64), -1);
    const torch::Tensor rows = logp.slice(0, w.first_target - 1 - w.begin, w.end - 1 - w.begin);
    const torch::Tensor targets = ids_of(text.subspan(static_cast<std::size_t>(w.first_target), static_cast<std::size_t>(w.n_targets())));
    nll -= rows.gather(1, targets.view({-1, 1})).sum().item<double>();
    out.tokens += w.n_targets();
  }
  out.ppl = std::exp(nll / static_cast<double>(out.tokens));
  return out;
}

}  // namespace

Expected<LoraAdapter> finetune_impl(FloatModel base, std::span<const std::int32_t> text, std::span<const std::int32_t> eval_text,
                                    const FinetuneOptions& o, ThreadPool& pool, FinetuneReport* report, const DistillProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  PEREGRINE_RETURN_IF_ERROR(start_head_run(base, o.seq, text.size(), o.seed, pool));
  const std::int64_t vocab = base.config().vocab_size;
  PEREGRINE_RETURN_IF_ERROR(check_tokens(text, vocab, "the training text"));
  PEREGRINE_RETURN_IF_ERROR(check_tokens(eval_text, vocab, "the evaluation text"));
  std::vector<std::string> tensors;
  for (const std::string& t : o.targets) {
    PEREGRINE_ASSIGN_OR_RETURN(std::string name, lora_target_tensor(t));
    tensors.push_back(std::move(name));
  }
  PEREGRINE_ASSIGN_OR_RETURN(const LoraModel model, LoraModel::create(base, initial_lora_adapter(base, tensors, o.rank, o.alpha), o.qlora));
  for (const std::string& name : base.names()) {
    if (model.quantized(name)) base.erase(name);  // QLoRA keeps these as NF4 codes only
  }
  FinetuneReport rep;
  rep.base_bits_per_weight = model.base_bits_per_weight();
  if (!eval_text.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(const HeldOut before, held_out_perplexity(model, eval_text, o.seq));
    rep.eval_tokens = before.tokens;
    rep.eval_ppl_before = before.ppl;
  }
  const std::vector<torch::Tensor> params = model.parameters();
  for (const torch::Tensor& p : params) rep.trainable += p.numel();
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(o.lr).weight_decay(0.0));
  const auto loss_of = [&](std::int64_t step) -> Expected<torch::Tensor> {
    return causal_lm_loss(model, text_windows(text, -1, o.batch, o.seq, o.seed, step));
  };
  PEREGRINE_ASSIGN_OR_RETURN(const StepsDone done, run_steps(opt, o.lr, o.warmup, o.steps, o.batch * o.seq, loss_of, progress));
  rep.steps = o.steps;
  rep.first_loss = done.log.first();
  rep.last_loss = done.log.last();
  rep.seconds = done.seconds;
  if (!eval_text.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(const HeldOut after, held_out_perplexity(model, eval_text, o.seq));
    rep.eval_ppl_after = after.ppl;
  }
  if (report != nullptr) *report = rep;
  return model.adapter();
}

Expected<std::vector<float>> lora_reference_logits_impl(const FloatModel& base, const LoraAdapter& adapter, bool qlora,
                                                        std::span<const std::int32_t> tokens) {
  PEREGRINE_ASSIGN_OR_RETURN(const LoraModel model, LoraModel::create(base, adapter, qlora));
  if (tokens.empty() || static_cast<std::int64_t>(tokens.size()) > base.config().max_seq_len) {
    return invalid_argument("lora_reference_logits: between 1 and the context's tokens");
  }
  PEREGRINE_RETURN_IF_ERROR(check_tokens(tokens, base.config().vocab_size, "lora_reference_logits"));
  const torch::NoGradGuard no_grad;
  return values_of(model.forward(ids_of(tokens)));
}

}  // namespace peregrine::train

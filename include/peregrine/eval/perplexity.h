// Perplexity of a model on a long text, over sliding windows (eval/eval_windows.h): the
// exponential of the mean negative log-likelihood of every scored token,
// ppl = exp(-(1/N) Σ_t log p(x_t | x_<t within its window)) (Jelinek et al. 1977; windowing as
// in the Hugging Face "Perplexity of fixed-length models" guide).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/eval/eval_windows.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

struct PerplexityResult {
  std::int64_t n_scored = 0;   // tokens scored
  std::int64_t n_windows = 0;  // windows run
  double nll = 0.0;            // mean negative log-likelihood, nats per token
  double ppl = 0.0;            // exp(nll)
};

/// Perplexity of `model` on `tokens` (ids of the model's vocabulary, usually starting with
/// BOS) over the windows of plan_eval_windows(tokens.size(), o), K/V in o.kv_type;
/// log-softmax in f64. `progress`, when set, is called after every window.
/// Errors: those of plan_eval_windows, make_window_cache (kInvalidArgument: o.ctx longer than the
/// model's context) and window_logits.
Expected<PerplexityResult> perplexity(const LlamaModel& model, std::span<const std::int32_t> tokens,
                                      const EvalWindowOptions& o, ThreadPool& pool,
                                      const EvalProgress& progress = {});

}  // namespace peregrine

#include "peregrine/eval/perplexity.h"

#include <cmath>
#include <string>
#include <vector>

#include "peregrine/eval/logit_comparison.h"

namespace peregrine {

Expected<PerplexityResult> perplexity(const LlamaModel& model, std::span<const std::int32_t> tokens,
                                      const EvalWindowOptions& o, ThreadPool& pool, const EvalProgress& progress) {
  PEREGRINE_ASSIGN_OR_RETURN(auto windows, plan_eval_windows(static_cast<std::int64_t>(tokens.size()), o));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(model.config(), o.ctx, o.kv_type));
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  PerplexityResult r;
  double nll_sum = 0.0;
  std::vector<float> logits;
  for (const EvalWindow& w : windows) {
    PEREGRINE_RETURN_IF_ERROR(window_logits(model, tokens, w, cache, pool, logits));
    for (std::int64_t j = 0; j < w.n_targets(); ++j) {
      const std::span<const float> row(logits.data() + static_cast<std::size_t>(j) * vocab, vocab);
      nll_sum -= log_softmax_at(row, tokens[static_cast<std::size_t>(w.first_target + j)]);
    }
    r.n_scored += w.n_targets();
    ++r.n_windows;
    if (progress) progress(r.n_windows, static_cast<std::int64_t>(windows.size()));
  }
  r.nll = nll_sum / static_cast<double>(r.n_scored);
  r.ppl = std::exp(r.nll);
  return r;
}

}  // namespace peregrine

#include "peregrine/eval/logit_comparison.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "peregrine/kv/kv_cache.h"

namespace peregrine {
namespace {

/// max and log Σ exp(x - max) of a logit row, f64.
std::pair<double, double> max_and_log_sum_exp(std::span<const float> x) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0.0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return {m, std::log(s)};
}

std::int64_t argmax(std::span<const float> x) {
  return std::max_element(x.begin(), x.end()) - x.begin();
}

}  // namespace

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const auto [pm, plse] = max_and_log_sum_exp(p_logits);
  const auto [qm, qlse] = max_and_log_sum_exp(q_logits);
  double kl = 0.0;
  for (std::size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = p_logits[i] - pm - plse, log_q = q_logits[i] - qm - qlse;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);  // rounding can leave -1e-17 for identical rows
}

double log_softmax_at(std::span<const float> logits, std::int64_t index) {
  const auto [m, lse] = max_and_log_sum_exp(logits);
  return logits[static_cast<std::size_t>(index)] - m - lse;
}

Expected<std::vector<float>> teacher_forced_logits(const LlamaModel& model,
                                                   std::span<const std::int32_t> tokens,
                                                   ThreadPool& pool, DType kv_type) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) return invalid_argument("teacher_forced_logits: no tokens");
  if (n > model.config().max_seq_len) {
    return invalid_argument("teacher_forced_logits: " + std::to_string(n) + " tokens exceed the context of " +
                            std::to_string(model.config().max_seq_len));
  }
  auto cache = KvCache::create(model.config(), {static_cast<std::int32_t>(blocks_for_tokens(n, kDefaultKvBlockSize)), kDefaultKvBlockSize, kv_type});
  if (!cache) return cache.status();
  Batch batch;
  for (std::int64_t i = 0; i < n; ++i) batch.add(tokens[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, true);
  std::vector<float> logits;
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, *cache, logits, pool));
  return logits;
}

Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, ThreadPool& pool) {
  if (tokens.size() < 2) return invalid_argument("compare_logits: need at least 2 tokens");
  const std::int64_t vocab = reference.config().vocab_size;
  if (candidate.config().vocab_size != vocab) return invalid_argument("compare_logits: the vocabularies differ");
  auto ref = teacher_forced_logits(reference, tokens, pool);
  if (!ref) return ref.status();
  auto cand = teacher_forced_logits(candidate, tokens, pool);
  if (!cand) return cand.status();
  LogitComparison c;
  c.n_positions = static_cast<std::int64_t>(tokens.size()) - 1;
  double ref_nll = 0.0, cand_nll = 0.0, agree = 0.0;
  for (std::int64_t i = 0; i < c.n_positions; ++i) {
    const std::span<const float> p(ref->data() + i * vocab, static_cast<std::size_t>(vocab));
    const std::span<const float> q(cand->data() + i * vocab, static_cast<std::size_t>(vocab));
    const double kl = kl_divergence(p, q);
    c.mean_kl += kl;
    c.max_kl = std::max(c.max_kl, kl);
    agree += argmax(p) == argmax(q) ? 1.0 : 0.0;
    ref_nll -= log_softmax_at(p, tokens[static_cast<std::size_t>(i + 1)]);
    cand_nll -= log_softmax_at(q, tokens[static_cast<std::size_t>(i + 1)]);
  }
  const auto n = static_cast<double>(c.n_positions);
  c.mean_kl /= n;
  c.top1_agreement = agree / n;
  c.reference_ppl = std::exp(ref_nll / n);
  c.candidate_ppl = std::exp(cand_nll / n);
  return c;
}

}  // namespace peregrine

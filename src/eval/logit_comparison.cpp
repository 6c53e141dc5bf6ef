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

/// Running sums of compare_logits over the scored positions.
struct ComparisonSums {
  double kl = 0.0, max_kl = 0.0, agree = 0.0, ref_nll = 0.0, cand_nll = 0.0;
  std::int64_t n = 0;

  /// Adds one position: reference and candidate logits p, q predicting token `target`.
  void add(std::span<const float> p, std::span<const float> q, std::int32_t target) {
    const double d = kl_divergence(p, q);
    kl += d;
    max_kl = std::max(max_kl, d);
    agree += argmax(p) == argmax(q) ? 1.0 : 0.0;
    ref_nll -= log_softmax_at(p, target);
    cand_nll -= log_softmax_at(q, target);
    ++n;
  }

  /// Adds the scored positions of window `w`: rows [w.n_targets(), vocab] of both models.
  void add_window(const EvalWindow& w, std::span<const float> ref, std::span<const float> cand,
                  std::span<const std::int32_t> tokens, std::int64_t vocab) {
    const auto row = static_cast<std::size_t>(vocab);
    for (std::int64_t j = 0; j < w.n_targets(); ++j) {
      const auto at = static_cast<std::size_t>(j) * row;
      add(ref.subspan(at, row), cand.subspan(at, row), tokens[static_cast<std::size_t>(w.first_target + j)]);
    }
  }

  LogitComparison result(std::int64_t n_windows) const {
    const auto count = static_cast<double>(n);
    return {n, n_windows, kl / count, max_kl, agree / count, std::exp(ref_nll / count), std::exp(cand_nll / count)};
  }
};

Status check_vocabularies(std::int64_t vocab, const LlamaModel& candidate) {
  if (candidate.config().vocab_size == vocab) return Status::ok();
  return invalid_argument("the vocabularies differ: the reference has " + std::to_string(vocab) +
                          " tokens, the compared model " + std::to_string(candidate.config().vocab_size));
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
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(model.config(), n, kv_type));
  Batch batch;
  for (std::int64_t i = 0; i < n; ++i) batch.add(tokens[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, true);
  std::vector<float> logits;
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
  return logits;
}

Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, ThreadPool& pool) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  return compare_logits(reference, candidate, tokens, EvalWindowOptions{n, n, DType::kF32}, pool);
}

Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, const EvalWindowOptions& o,
                                         ThreadPool& pool, const EvalProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(check_vocabularies(reference.config().vocab_size, candidate));
  PEREGRINE_ASSIGN_OR_RETURN(auto windows, plan_eval_windows(static_cast<std::int64_t>(tokens.size()), o));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache ref_cache, make_window_cache(reference.config(), o.ctx, DType::kF32));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cand_cache, make_window_cache(candidate.config(), o.ctx, o.kv_type));
  ComparisonSums sums;
  std::vector<float> ref_logits, cand_logits;
  for (std::size_t k = 0; k < windows.size(); ++k) {
    PEREGRINE_RETURN_IF_ERROR(window_logits(reference, tokens, windows[k], ref_cache, pool, ref_logits));
    PEREGRINE_RETURN_IF_ERROR(window_logits(candidate, tokens, windows[k], cand_cache, pool, cand_logits));
    sums.add_window(windows[k], ref_logits, cand_logits, tokens, reference.config().vocab_size);
    if (progress) progress(static_cast<std::int64_t>(k) + 1, static_cast<std::int64_t>(windows.size()));
  }
  return sums.result(static_cast<std::int64_t>(windows.size()));
}

Expected<ReferenceLogits> reference_logits(const LlamaModel& reference, std::span<const std::int32_t> tokens,
                                           EvalWindowOptions o, ThreadPool& pool, const EvalProgress& progress) {
  o.kv_type = DType::kF32;
  ReferenceLogits r{o, {}, {}, reference.config().vocab_size};
  PEREGRINE_ASSIGN_OR_RETURN(r.windows, plan_eval_windows(static_cast<std::int64_t>(tokens.size()), o));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(reference.config(), o.ctx, DType::kF32));
  r.rows.resize(r.windows.size());
  for (std::size_t k = 0; k < r.windows.size(); ++k) {
    PEREGRINE_RETURN_IF_ERROR(window_logits(reference, tokens, r.windows[k], cache, pool, r.rows[k]));
    if (progress) progress(static_cast<std::int64_t>(k) + 1, static_cast<std::int64_t>(r.windows.size()));
  }
  return r;
}

Expected<LogitComparison> compare_logits(const ReferenceLogits& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, DType kv_type, ThreadPool& pool,
                                         const EvalProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(check_vocabularies(reference.vocab, candidate));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, make_window_cache(candidate.config(), reference.options.ctx, kv_type));
  ComparisonSums sums;
  std::vector<float> cand_logits;
  const auto n_windows = static_cast<std::int64_t>(reference.windows.size());
  for (std::size_t k = 0; k < reference.windows.size(); ++k) {
    PEREGRINE_RETURN_IF_ERROR(window_logits(candidate, tokens, reference.windows[k], cache, pool, cand_logits));
    sums.add_window(reference.windows[k], reference.rows[k], cand_logits, tokens, reference.vocab);
    if (progress) progress(static_cast<std::int64_t>(k) + 1, n_windows);
  }
  return sums.result(n_windows);
}

}  // namespace peregrine

// Quality side of the Pareto picture: how far a compressed model's next-token distributions are
// from a reference model's on real text (teacher forcing), as KL divergence, top-1 agreement
// and perplexity (llama.cpp's `perplexity --kl-divergence` statistics), on one window or on the
// sliding windows of eval/eval_windows.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/eval/eval_windows.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

/// KL(P || Q) = Σ p log(p / q) in nats between softmax(p_logits) and softmax(q_logits), both
/// [n] f32 (same length, n >= 1), computed in f64 with max-subtracted log-sum-exp.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

/// log softmax(logits)[index] in nats, f64. logits: [n] f32; index in [0, n).
double log_softmax_at(std::span<const float> logits, std::int64_t index);

/// Logits [tokens.size(), vocab] f32 of every position of `tokens` fed in one prefill forward
/// of a fresh single-sequence KV cache of `kv_type` (any KV type of kv/kv_cache.h; blocks of
/// 16) (row i predicts token i+1).
/// Errors: kInvalidArgument (empty, longer than the model's context), KvCache::create's and
/// forward's errors.
Expected<std::vector<float>> teacher_forced_logits(const LlamaModel& model,
                                                   std::span<const std::int32_t> tokens,
                                                   ThreadPool& pool, DType kv_type = DType::kF32);

struct LogitComparison {
  std::int64_t n_positions = 0;  // positions compared (tokens scored; one window: tokens.size() - 1)
  std::int64_t n_windows = 0;    // windows run (1 for the single-window overload)
  double mean_kl = 0.0;          // mean over positions of KL(reference || candidate), nats
  double max_kl = 0.0;           // largest per-position KL, nats
  double top1_agreement = 0.0;   // share of positions whose argmax token is the same, [0, 1]
  double reference_ppl = 0.0;    // perplexity of the reference on tokens[1..]
  double candidate_ppl = 0.0;    // perplexity of the candidate on tokens[1..]
};

/// Compares `candidate` against `reference` on `tokens` (>= 2 tokens, same vocabulary size) in
/// one window holding them all, both with f32 K/V.
/// Errors: kInvalidArgument (fewer than 2 tokens, more than either model's context,
/// vocabularies differ), forward's.
Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, ThreadPool& pool);

/// The same statistics over every token the windows of plan_eval_windows(tokens.size(), o)
/// score: at each scored position the reference's and the candidate's distributions
/// come from the same window. The reference keeps f32 K/V, the candidate uses o.kv_type (so a
/// model compared with itself measures its KV cache type). `progress` is called after every
/// window.
/// Errors: kInvalidArgument (vocabularies differ; those of plan_eval_windows; o.ctx longer than
/// either model's context), forward's.
Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, const EvalWindowOptions& o,
                                         ThreadPool& pool, const EvalProgress& progress = {});

/// A reference model's logits over every window of one evaluation, kept so that many
/// candidates are compared against it without running the reference again (pareto sweeps).
/// Memory: 4 · vocab bytes per scored token (SmolLM2-135M, 2048 tokens: 400 MB).
struct ReferenceLogits {
  EvalWindowOptions options;             // the windows' plan (kv_type: the reference's, f32)
  std::vector<EvalWindow> windows;       // plan_eval_windows(tokens.size(), options)
  std::vector<std::vector<float>> rows;  // per window: [n_targets, vocab] f32 (window_logits)
  std::int64_t vocab = 0;
};

/// Runs `reference` (f32 K/V) over the windows of plan_eval_windows(tokens.size(), o) and keeps
/// their logits; `progress` is called after every window.
/// Errors: those of plan_eval_windows, make_window_cache (o.ctx longer than the context) and forward.
Expected<ReferenceLogits> reference_logits(const LlamaModel& reference, std::span<const std::int32_t> tokens,
                                           EvalWindowOptions o, ThreadPool& pool, const EvalProgress& progress = {});

/// compare_logits's statistics of `candidate` (K/V in `kv_type`) against kept reference logits
/// over the same `tokens`. Errors: kInvalidArgument (vocabularies differ; o.ctx longer than the
/// candidate's context), forward's.
Expected<LogitComparison> compare_logits(const ReferenceLogits& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, DType kv_type, ThreadPool& pool,
                                         const EvalProgress& progress = {});

}  // namespace peregrine

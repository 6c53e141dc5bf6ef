// Quality side of the Pareto picture: how far a compressed model's next-token distributions are
// from a reference model's on real text (teacher forcing), as KL divergence, top-1 agreement
// and perplexity.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

/// KL(P || Q) = Σ p log(p / q) in nats between softmax(p_logits) and softmax(q_logits), both
/// [n] f32 (same length, n >= 1), computed in f64 with max-subtracted log-sum-exp.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

/// log softmax(logits)[index] in nats, f64. logits: [n] f32; index in [0, n).
double log_softmax_at(std::span<const float> logits, std::int64_t index);

/// Logits [tokens.size(), vocab] f32 of every position of `tokens` fed in one prefill forward
/// of a fresh single-sequence KV cache of `kv_type` (f32, f16 or q8_0; blocks of 16) (row i
/// predicts token i+1).
/// Errors: kInvalidArgument (empty, longer than the model's context), KvCache::create's and
/// forward's errors.
Expected<std::vector<float>> teacher_forced_logits(const LlamaModel& model,
                                                   std::span<const std::int32_t> tokens,
                                                   ThreadPool& pool, DType kv_type = DType::kF32);

struct LogitComparison {
  std::int64_t n_positions = 0;  // positions compared (tokens.size() - 1: each predicts the next)
  double mean_kl = 0.0;          // mean over positions of KL(reference || candidate), nats
  double max_kl = 0.0;           // largest per-position KL, nats
  double top1_agreement = 0.0;   // share of positions whose argmax token is the same, [0, 1]
  double reference_ppl = 0.0;    // perplexity of the reference on tokens[1..]
  double candidate_ppl = 0.0;    // perplexity of the candidate on tokens[1..]
};

/// Compares `candidate` against `reference` on `tokens` (>= 2 tokens, same vocabulary size).
/// Errors: kInvalidArgument (fewer than 2 tokens, vocabularies differ), teacher_forced_logits'.
Expected<LogitComparison> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                         std::span<const std::int32_t> tokens, ThreadPool& pool);

}  // namespace peregrine

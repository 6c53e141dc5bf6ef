// llama-bench-style throughput measurement: prefill (pp) and decode (tg) tokens/s of a model,
// over repetitions, with the cost figures that turn them into GB/s and GFLOP/s.
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

struct BenchParams {
  std::int64_t n_prompt = 512;  // pp test: one prefill forward of this many tokens (0 = skip)
  std::int64_t n_gen = 128;     // tg test: this many decode forwards (0 = skip)
  std::int64_t batch = 1;       // tg test: sequences decoding together, one row each per forward
  int reps = 5;                 // timed repetitions of each test (after one untimed warm-up)
  std::uint64_t seed = 1234;    // random token ids (speed does not depend on them)
  bool profile = false;         // time the forwards' op kinds over the timed repetitions
  DType kv_type = DType::kF32;  // the KV cache's element type (kv/kv_cache.h's types)
};

/// Per-forward costs of a model, from its config and tensor sizes.
struct ModelCost {
  /// Weight bytes one decode step reads: every layer matrix and norm, the final norm, the LM
  /// head, and one embedding row (the whole embedding only when it is the tied LM head); of a
  /// Mixture-of-Experts layer the router and the n_experts_used experts a token runs (their
  /// share n_experts_used / n_experts of the expert bytes; experts are of one size).
  double decode_weight_bytes = 0.0;
  /// Multiply-add FLOPs (2 per MAC) of the matrix products for one token that needs logits
  /// (with experts: those of its n_experts_used experts).
  double matmul_flops_per_token = 0.0;
  /// 2 * (2 * n_heads * head_dim) * n_layers: attention FLOPs per (query, visible key) pair.
  double attention_flops_per_pair = 0.0;
  /// FLOPs of one forward of `n` new tokens of one sequence starting at position `p0`, only the
  /// last row needing logits (the pp test).
  double prefill_flops(std::int64_t p0, std::int64_t n, std::int64_t vocab, std::int64_t dim) const;
};
ModelCost model_cost(const LlamaModel& model);

struct BenchResult {
  std::vector<double> pp_tps;  // prompt tokens/s of each timed repetition
  std::vector<double> tg_tps;  // generated tokens/s of each timed repetition (all `batch` sequences)
  double pp_flops = 0.0;       // FLOPs of one pp forward
  double tg_flops = 0.0;       // FLOPs of the whole tg test (n_gen decode steps from position 0,
                               // `batch` rows each)
  /// Measured (LlamaModel::counters): weight bytes one pp forward read, and one decode step on
  /// average. A Mixture-of-Experts pp forward reads each chosen expert once per layer.
  double pp_weight_bytes = 0.0, tg_weight_bytes = 0.0;
  /// Tokens routed to each expert over every forward of the bench (warm-ups included),
  /// [n_layers * n_experts] layer-major; empty for a dense model.
  std::vector<std::uint64_t> expert_tokens;
  /// With BenchParams::profile: per op kind, totals over the timed repetitions of each test
  /// (model/forward_profile.h); all zero otherwise.
  ForwardProfileTotals pp_profile{}, tg_profile{};
};

/// Runs the pp and tg tests like llama-bench: pp = one forward of n_prompt random tokens into an
/// empty KV cache (logits for the last row only); tg = n_gen single-token forwards from
/// position 0, each producing logits. The KV cache is sized for the larger test.
/// Errors: kInvalidArgument (negative sizes, reps < 1, a test longer than the model's context),
/// kResourceExhausted (KV cache allocation), and forward's errors.
Expected<BenchResult> run_bench(const LlamaModel& model, const BenchParams& params, ThreadPool& pool);

/// Mean and sample standard deviation (0 for fewer than two values).
struct MeanSd {
  double mean = 0.0, sd = 0.0;
};
MeanSd mean_sd(const std::vector<double>& xs);

}  // namespace peregrine

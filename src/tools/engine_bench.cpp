#include "peregrine/tools/engine_bench.h"

#include <chrono>
#include <cmath>
#include <random>
#include <string>

#include "formats/fused_projections.h"
#include "peregrine/kv/kv_cache.h"

namespace peregrine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double matrix_macs(const TensorView& t) { return static_cast<double>(t.numel()); }

/// The share of a token's forwards that run tensor `name`: n_experts_used / n_experts for an
/// expert's matrix ("blk.L.ffn_up.E.weight"), 1 for the others.
double active_share(const ModelConfig& c, const std::string& name) {
  const bool expert = stacked_expert_name(name).has_value();
  return expert ? static_cast<double>(c.n_experts_used) / static_cast<double>(c.n_experts) : 1.0;
}

/// Runs `timed` and adds the weight bytes the model's forwards read meanwhile to `bytes`.
template <typename Run>
auto counting_bytes(const LlamaModel& model, double& bytes, Run timed) {
  const std::uint64_t before = model.counters().weight_bytes();
  auto r = timed();
  bytes += static_cast<double>(model.counters().weight_bytes() - before);
  return r;
}

/// Runs `run`, profiling the model's forwards meanwhile into `totals` when `on`.
template <typename Run>
auto profiling(const LlamaModel& model, bool on, ForwardProfileTotals& totals, Run run) {
  if (!on) return run();
  ForwardProfile& profile = model.profile();
  const ForwardProfileTotals before = profile.totals();
  profile.set_enabled(true);
  auto r = run();
  profile.set_enabled(false);
  const ForwardProfileTotals window = profile.totals() - before;
  for (std::size_t i = 0; i < kForwardOpCount; ++i) {
    totals[i].seconds += window[i].seconds;
    totals[i].calls += window[i].calls;
    totals[i].weight_bytes += window[i].weight_bytes;
  }
  return r;
}

/// Tokens per expert routed since `start` (a counters().expert_tokens() snapshot).
std::vector<std::uint64_t> tokens_since(const LlamaModel& model, const std::vector<std::uint64_t>& start) {
  std::vector<std::uint64_t> now = model.counters().expert_tokens();
  for (std::size_t i = 0; i < now.size(); ++i) now[i] -= start[i];
  return now;
}

Status check_params(const LlamaModel& model, const BenchParams& p) {
  if (p.n_prompt < 0 || p.n_gen < 0) return invalid_argument("bench: -p and -n must be >= 0");
  if (p.n_prompt == 0 && p.n_gen == 0) return invalid_argument("bench: both -p and -n are 0, nothing to measure");
  if (p.reps < 1) return invalid_argument("bench: -r must be >= 1");
  if (p.batch < 1 || p.batch > 1024) return invalid_argument("bench: --batch must be in [1, 1024]");
  const std::int64_t ctx = model.config().max_seq_len;
  if (p.n_prompt > ctx || p.n_gen > ctx) {
    return invalid_argument("bench: a test of " + std::to_string(std::max(p.n_prompt, p.n_gen)) +
                            " tokens exceeds the model's context of " + std::to_string(ctx));
  }
  return Status::ok();
}

/// Seconds for one forward of `n` random tokens into an empty cache, logits for the last row.
Expected<double> time_prefill(const LlamaModel& model, std::int64_t n, KvCache& cache,
                              std::mt19937& rng, ThreadPool& pool) {
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(model.config().vocab_size - 1));
  Batch batch;
  for (std::int64_t i = 0; i < n; ++i) batch.add(token(rng), static_cast<std::int32_t>(i), 0, i == n - 1);
  std::vector<float> logits;
  cache.free_sequence(0);
  const auto t0 = std::chrono::steady_clock::now();
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
  return seconds_since(t0);
}

/// Seconds for `n` decode forwards from position 0 of `n_seq` sequences, one row each.
Expected<double> time_decode(const LlamaModel& model, std::int64_t n, std::int64_t n_seq, KvCache& cache,
                             std::mt19937& rng, ThreadPool& pool) {
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(model.config().vocab_size - 1));
  Batch batch;
  std::vector<float> logits;
  for (std::int64_t s = 0; s < n_seq; ++s) cache.free_sequence(static_cast<std::int32_t>(s));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    batch.clear();
    for (std::int64_t s = 0; s < n_seq; ++s) batch.add(token(rng), static_cast<std::int32_t>(i), static_cast<std::int32_t>(s), true);
    PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
  }
  return seconds_since(t0);
}

/// One untimed warm-up, then `reps` timed runs of `run(timed)`, as tokens/s of `n` tokens each.
template <typename Run>
Expected<std::vector<double>> repeat(int reps, std::int64_t n, Run run) {
  std::vector<double> tps;
  if (n == 0) return tps;
  for (int r = -1; r < reps; ++r) {
    auto s = run(r >= 0);
    if (!s) return s.status();
    if (r >= 0) tps.push_back(static_cast<double>(n) / *s);
  }
  return tps;
}

}  // namespace

double ModelCost::prefill_flops(std::int64_t p0, std::int64_t n, std::int64_t vocab, std::int64_t dim) const {
  // Row i attends to p0 + i + 1 positions; the LM head runs for the last row only.
  const double pairs = static_cast<double>(n) * static_cast<double>(p0) + 0.5 * n * (n + 1.0);
  const double head = 2.0 * static_cast<double>(vocab) * static_cast<double>(dim);
  return static_cast<double>(n) * (matmul_flops_per_token - head) + head + pairs * attention_flops_per_pair;
}

ModelCost model_cost(const LlamaModel& model) {
  const ModelFile& f = model.file();
  const ModelConfig& c = model.config();
  const TensorView& embd = *f.find("token_embd.weight");
  const TensorView& head = c.tied_embeddings ? embd : *f.find("output.weight");
  ModelCost cost;
  double macs = matrix_macs(head);
  for (const auto& [name, t] : f.tensors) {
    if (&t == &embd) continue;
    const double share = active_share(c, name);
    cost.decode_weight_bytes += share * static_cast<double>(t.nbytes);
    if (t.shape.size() == 2 && &t != &head) macs += share * matrix_macs(t);
  }
  cost.decode_weight_bytes += c.tied_embeddings ? static_cast<double>(embd.nbytes)
                                                : static_cast<double>(embd.nbytes) / static_cast<double>(c.vocab_size);
  cost.matmul_flops_per_token = 2.0 * macs;
  cost.attention_flops_per_pair = 4.0 * static_cast<double>(c.n_heads * c.head_dim * c.n_layers);
  return cost;
}

Expected<BenchResult> run_bench(const LlamaModel& model, const BenchParams& p, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(check_params(model, p));
  const auto n_blocks = static_cast<std::int32_t>(std::max(blocks_for_tokens(p.n_prompt, kDefaultKvBlockSize),
                                                           p.batch * blocks_for_tokens(p.n_gen, kDefaultKvBlockSize)));
  auto cache = KvCache::create(model.config().kv_shape(), {n_blocks, kDefaultKvBlockSize, p.kv_type});
  if (!cache) return cache.status();
  std::mt19937 rng(static_cast<std::mt19937::result_type>(p.seed));
  BenchResult r;
  const std::vector<std::uint64_t> start = model.counters().expert_tokens();
  auto pp = repeat(p.reps, p.n_prompt, [&](bool timed) {
    return profiling(model, timed && p.profile, r.pp_profile, [&] {
      return counting_bytes(model, r.pp_weight_bytes, [&] { return time_prefill(model, p.n_prompt, *cache, rng, pool); });
    });
  });
  if (!pp) return pp.status();
  auto tg = repeat(p.reps, p.n_gen * p.batch, [&](bool timed) {
    return profiling(model, timed && p.profile, r.tg_profile, [&] {
      return counting_bytes(model, r.tg_weight_bytes, [&] { return time_decode(model, p.n_gen, p.batch, *cache, rng, pool); });
    });
  });
  if (!tg) return tg.status();
  r.pp_tps = std::move(*pp);
  r.tg_tps = std::move(*tg);
  const int runs = p.reps + 1;  // with the warm-up
  r.pp_weight_bytes /= runs;
  if (p.n_gen > 0) r.tg_weight_bytes /= static_cast<double>(runs) * static_cast<double>(p.n_gen);
  r.expert_tokens = tokens_since(model, start);
  const ModelCost cost = model_cost(model);
  const ModelConfig& c = model.config();
  r.pp_flops = cost.prefill_flops(0, p.n_prompt, c.vocab_size, c.dim);
  r.tg_flops = static_cast<double>(p.batch) * (static_cast<double>(p.n_gen) * cost.matmul_flops_per_token +
                                               0.5 * p.n_gen * (p.n_gen + 1.0) * cost.attention_flops_per_pair);
  return r;
}

MeanSd mean_sd(const std::vector<double>& xs) {
  MeanSd m;
  if (xs.empty()) return m;
  for (double x : xs) m.mean += x;
  m.mean /= static_cast<double>(xs.size());
  if (xs.size() < 2) return m;
  double ss = 0.0;
  for (double x : xs) ss += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(ss / static_cast<double>(xs.size() - 1));
  return m;
}

}  // namespace peregrine

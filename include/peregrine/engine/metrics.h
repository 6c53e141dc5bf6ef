// Serving metrics: counters, gauges and latency histograms the engine keeps, as a snapshot the
// server prints in the Prometheus text format.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace peregrine {

/// A cumulative histogram with fixed upper bounds (Prometheus `le` buckets, seconds).
struct Histogram {
  std::vector<double> bounds;        // increasing upper bounds; +Inf is implicit
  std::vector<std::int64_t> counts;  // per bound, non-cumulative, plus one overflow slot
  double sum = 0;
  std::int64_t count = 0;

  /// Buckets for latencies from 1 ms to 60 s.
  static Histogram latency_seconds();
  void observe(double value);
  /// The q-quantile (0 < q < 1) by linear interpolation inside the bucket; 0 when empty.
  double quantile(double q) const;
};

/// A consistent snapshot of the engine's metrics.
struct EngineMetrics {
  std::map<std::string, std::int64_t> requests_by_status;  // finish reason / "rejected" → count
  Histogram ttft = Histogram::latency_seconds();    // time to first token (s)
  Histogram itl = Histogram::latency_seconds();     // inter-token latency (s)
  Histogram e2e = Histogram::latency_seconds();     // end-to-end request latency (s)
  std::int64_t running = 0;                          // requests with KV in the cache
  std::int64_t waiting = 0;                          // queued (incl. preempted)
  std::int64_t kv_blocks_total = 0;
  std::int64_t kv_blocks_used = 0;    // referenced by a running sequence
  std::int64_t kv_blocks_free = 0;    // free + evictable prefix-cache blocks
  std::int64_t kv_blocks_cached = 0;  // held by the prefix cache
  std::int64_t prefix_tokens_queried = 0;
  std::int64_t prefix_tokens_hit = 0;
  std::int64_t prompt_tokens_total = 0;      // prompt tokens computed (cache hits excluded)
  std::int64_t generation_tokens_total = 0;  // tokens sampled
  double prompt_tokens_per_s = 0;      // over the last ~10 s
  double generation_tokens_per_s = 0;  // over the last ~10 s
  std::int64_t preemptions_total = 0;
  std::int64_t steps_total = 0;
  std::int64_t spec_draft_tokens_total = 0;     // draft tokens (tree nodes) proposed
  std::int64_t spec_accepted_tokens_total = 0;  // draft tokens accepted by verification
  std::int64_t spec_steps_total = 0;            // verification steps (per sequence)
  std::uint64_t weight_bytes_read_total = 0;    // the model's matrix products (ForwardCounters)
  std::int64_t kv_bytes_shipped_total = 0;     // K/V rows shipped in by a remote prefill
  std::int64_t lora_adapters_resident = 0;      // LoRA adapters loaded in the engine's LoraPool
  std::int64_t lora_loads_total = 0;            // adapter loads (startup and on demand)
  std::int64_t lora_evictions_total = 0;        // adapters evicted to load another
  std::int64_t n_experts = 0;                   // Mixture-of-Experts: experts per layer (0: dense)
  std::vector<std::uint64_t> expert_tokens;     // tokens routed per (layer, expert), layer-major
  /// spec_accepted_tokens_total / spec_draft_tokens_total (0 when nothing was drafted).
  double spec_acceptance_rate() const;
  /// Tokens emitted per verification step: (accepted + spec_steps_total) / spec_steps_total
  /// (each step also emits one correction or bonus token; 0 when no step ran).
  double spec_tokens_per_step() const;
  /// prefix_tokens_hit / prefix_tokens_queried (0 when nothing was queried).
  double prefix_hit_rate() const;
};

}  // namespace peregrine

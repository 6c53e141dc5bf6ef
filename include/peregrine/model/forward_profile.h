// Where LlamaModel::forward spends its time, per op kind: wall time on the calling thread
// (a threaded op's time includes waiting for the pool's slowest thread), the calls, and the
// weight bytes the op's matrix products read (from ForwardCounters), so that a decode step's
// time splits into matmuls at their own GB/s, attention, norms and the rest (`bench --profile`;
// llama.cpp's GGML_PERF per-op timings play this role there).
// Off by default: a disabled timer costs one relaxed atomic load. Totals are relaxed atomics,
// readable from any thread while a forward runs.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "peregrine/model/forward_counters.h"

namespace peregrine {

/// The op kinds of one decoder forward, in forward order. kForward is the whole forward (the
/// other kinds nest inside it; what they leave is batch checks, KV block reservation and
/// scratch buffers).
enum class ForwardOp : std::uint8_t {
  kEmbedding,        // token embedding rows (and Gemma's √dim scale)
  kNorm,             // RMSNorm before attention / FFN, post-norms and the residual adds
  kQkvProjection,    // Q, K, V matmuls, their biases and Q/K norms
  kRopeKvWrite,      // RoPE on q and k, the K/V rows written into the paged cache
  kAttention,        // attention over the KV cache (prefill tiles, decode split-K)
  kOutputProjection, // the attention output matmul (wo)
  kFfnGateUp,        // the dense FFN's gate and up matmuls
  kActivation,       // SwiGLU / GeGLU (and the Hadamard rotation before ffn_down)
  kFfnDown,          // the dense FFN's down matmul
  kMoeFfn,           // a Mixture-of-Experts FFN: routing and the chosen experts' matmuls
  kLmHead,           // final norm, LM head matmul, logit soft-capping
  kAllReduce,        // tensor parallelism: the partial sums of attn output and FFN summed over the ranks
  kForward,          // the whole forward
};
inline constexpr std::size_t kForwardOpCount = 13;

/// "embedding", "norm + residual", "qkv projection", ... "forward (total)".
const char* forward_op_name(ForwardOp op);

/// Totals of one op kind.
struct ForwardOpTotals {
  double seconds = 0.0;
  std::uint64_t calls = 0;
  double weight_bytes = 0.0;  // bytes of weights its matrix products read
};
using ForwardProfileTotals = std::array<ForwardOpTotals, kForwardOpCount>;

/// `a` − `b`, op by op (totals over a window: a later snapshot minus an earlier one).
ForwardProfileTotals operator-(const ForwardProfileTotals& a, const ForwardProfileTotals& b);

class ForwardProfile {
 public:
  /// Starts (true) or stops timing; totals are kept.
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Adds one call of `op` that took `nanoseconds` and read `weight_bytes` of weights.
  void add(ForwardOp op, std::uint64_t nanoseconds, std::uint64_t weight_bytes);
  /// The totals since creation (a snapshot).
  ForwardProfileTotals totals() const;

 private:
  struct Slot {
    std::atomic<std::uint64_t> ns{0}, calls{0}, bytes{0};
  };
  std::atomic<bool> enabled_{false};
  std::array<Slot, kForwardOpCount> slots_;
};

/// Times one op from construction to destruction into `profile` when it is enabled (else does
/// nothing), with the weight bytes `counters` gained meanwhile.
class ForwardOpTimer {
 public:
  ForwardOpTimer(ForwardProfile& profile, ForwardOp op, const ForwardCounters& counters);
  ~ForwardOpTimer();
  ForwardOpTimer(const ForwardOpTimer&) = delete;
  ForwardOpTimer& operator=(const ForwardOpTimer&) = delete;

 private:
  ForwardProfile* profile_;  // null when disabled
  ForwardOp op_;
  const ForwardCounters* counters_;
  std::uint64_t bytes0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace peregrine

#include "peregrine/model/forward_profile.h"

namespace peregrine {

const char* forward_op_name(ForwardOp op) {
  switch (op) {
    case ForwardOp::kEmbedding: return "embedding";
    case ForwardOp::kNorm: return "norm + residual";
    case ForwardOp::kQkvProjection: return "qkv projection";
    case ForwardOp::kRopeKvWrite: return "rope + kv write";
    case ForwardOp::kAttention: return "attention";
    case ForwardOp::kOutputProjection: return "attn output proj";
    case ForwardOp::kFfnGateUp: return "ffn gate + up";
    case ForwardOp::kActivation: return "ffn activation";
    case ForwardOp::kFfnDown: return "ffn down";
    case ForwardOp::kMoeFfn: return "moe ffn";
    case ForwardOp::kLmHead: return "lm head";
    case ForwardOp::kAllReduce: return "tp all-reduce";
    case ForwardOp::kForward: return "forward (total)";
  }
  return "?";
}

ForwardProfileTotals operator-(const ForwardProfileTotals& a, const ForwardProfileTotals& b) {
  ForwardProfileTotals d;
  for (std::size_t i = 0; i < kForwardOpCount; ++i) {
    d[i] = {a[i].seconds - b[i].seconds, a[i].calls - b[i].calls, a[i].weight_bytes - b[i].weight_bytes};
  }
  return d;
}

void ForwardProfile::add(ForwardOp op, std::uint64_t nanoseconds, std::uint64_t weight_bytes) {
  Slot& s = slots_[static_cast<std::size_t>(op)];
  s.ns.fetch_add(nanoseconds, std::memory_order_relaxed);
  s.calls.fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(weight_bytes, std::memory_order_relaxed);
}

ForwardProfileTotals ForwardProfile::totals() const {
  ForwardProfileTotals t;
  for (std::size_t i = 0; i < kForwardOpCount; ++i) {
    t[i] = {static_cast<double>(slots_[i].ns.load(std::memory_order_relaxed)) * 1e-9,
            slots_[i].calls.load(std::memory_order_relaxed),
            static_cast<double>(slots_[i].bytes.load(std::memory_order_relaxed))};
  }
  return t;
}

ForwardOpTimer::ForwardOpTimer(ForwardProfile& profile, ForwardOp op, const ForwardCounters& counters)
    : profile_(profile.enabled() ? &profile : nullptr), op_(op), counters_(&counters) {
  if (profile_ == nullptr) return;
  bytes0_ = counters.weight_bytes();
  t0_ = std::chrono::steady_clock::now();
}

ForwardOpTimer::~ForwardOpTimer() {
  if (profile_ == nullptr) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
  profile_->add(op_, static_cast<std::uint64_t>(ns), counters_->weight_bytes() - bytes0_);
}

}  // namespace peregrine

#include "peregrine/model/forward_counters.h"

namespace peregrine {

ForwardCounters::ForwardCounters(std::int64_t n_layers, std::int64_t n_experts)
    : n_layers_(n_layers),
      n_experts_(n_experts),
      expert_tokens_(std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(n_layers * n_experts))) {}

std::vector<std::uint64_t> ForwardCounters::expert_tokens() const {
  std::vector<std::uint64_t> out(static_cast<std::size_t>(n_layers_ * n_experts_));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = expert_tokens_[i].load(std::memory_order_relaxed);
  return out;
}

}  // namespace peregrine

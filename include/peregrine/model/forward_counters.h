// What LlamaModel::forward did since the model was created: the weight bytes its matrix
// products read, and for a Mixture-of-Experts model the tokens routed to each expert of each
// layer (expert load, the routing statistics of Fedus et al. 2022 / Mixtral's analysis).
// Relaxed atomics: `bench` and the server's /metrics read them from any thread while a
// forward runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace peregrine {

class ForwardCounters {
 public:
  /// n_experts 0: a dense model (no per-expert counts). Preconditions: both >= 0.
  ForwardCounters(std::int64_t n_layers, std::int64_t n_experts);

  /// Adds `n` bytes of weights read by one matrix product (each matrix counted once per call,
  /// however many tokens it multiplies: what a forward streams from memory).
  void add_weight_bytes(std::uint64_t n) { weight_bytes_.fetch_add(n, std::memory_order_relaxed); }
  /// Adds `n` tokens routed to `expert` of `layer`. Preconditions: both in range.
  void add_expert_tokens(std::int64_t layer, std::int64_t expert, std::uint64_t n) {
    expert_tokens_[static_cast<std::size_t>(layer * n_experts_ + expert)].fetch_add(n, std::memory_order_relaxed);
  }

  std::uint64_t weight_bytes() const { return weight_bytes_.load(std::memory_order_relaxed); }
  /// Tokens routed per (layer, expert), [n_layers * n_experts] layer-major; empty when dense.
  std::vector<std::uint64_t> expert_tokens() const;
  std::int64_t n_layers() const { return n_layers_; }
  std::int64_t n_experts() const { return n_experts_; }

 private:
  std::int64_t n_layers_, n_experts_;
  std::atomic<std::uint64_t> weight_bytes_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> expert_tokens_;
};

}  // namespace peregrine

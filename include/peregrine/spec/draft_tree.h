// A drafter's proposal for one sequence: a tree of candidate next tokens rooted at the last
// context token (SpecInfer, Miao et al. 2024; Medusa / EAGLE token trees). A chain is a tree
// whose nodes each have one child.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace peregrine {

struct DraftNode {
  std::int32_t token = 0;
  std::int32_t parent = -1;  // index of the parent node; -1: a child of the root
  float log_q = 0.0f;        // draft log-probability of the path root → this node (0 for PLD)
  /// Non-empty when `token` was drawn at random from this draft distribution q ((id,
  /// probability) pairs, probabilities summing to 1): stochastic verification accepts it with
  /// probability min(1, p(token) / q(token)). Empty: a deterministic proposal (q is one-hot on
  /// `token`; accepted with probability p(token) under sampling, iff argmax under greedy).
  std::vector<std::pair<std::int32_t, float>> q;
};

struct DraftTree {
  /// Parents come before their children; siblings are in the order verification tries them.
  std::vector<DraftNode> nodes;

  std::int64_t size() const { return static_cast<std::int64_t>(nodes.size()); }
  bool empty() const { return nodes.empty(); }
  /// 1 for a child of the root.
  std::int32_t depth(std::int64_t node) const;
  /// Every node has at most one child.
  bool is_chain() const;
};

}  // namespace peregrine

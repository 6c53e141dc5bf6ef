// One request's draft while ModelDrafter grows it from the draft model's logits, level by
// level: EAGLE-2's expand and rerank (Li et al. 2024) for token trees, a greedy or sampled
// chain (Leviathan et al. 2023) when branching == 1. Knows nothing of the KV cache or batches.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "peregrine/spec/drafter.h"

namespace peregrine {

class DraftTreeBuilder {
 public:
  /// `request` (its tokens, sampling and rng must outlive the builder) sets the node budget,
  /// branching and sampling; nodes deeper than `depth_limit` (>= 1) are never created; nodes
  /// whose path probability is below `min_confidence` are not expanded.
  DraftTreeBuilder(const DraftRequest& request, std::int32_t depth_limit, float min_confidence);

  /// A chain whose nodes are drawn at random (branching 1, temperature > 0): needs request.rng.
  static bool is_sampled_chain(const DraftRequest& request);

  /// Creates the children of `node` (-1: the root) from the draft model's logits after it,
  /// `logits` [vocab] f32, with the request's repetition penalty over tokens + the node's path:
  /// - a sampled chain (branching 1, temperature > 0): one child drawn with the request's rng
  ///   from q, the distribution the target's sampler would draw from; the node keeps q;
  /// - otherwise the `branching` most probable tokens (ties: lower id), deterministic (q empty).
  /// A child's score (DraftNode::log_q) is its parent's plus log q(child) (sampled) or the
  /// child's log-softmax at temperature 1 (deterministic): the draft log-probability of its
  /// path.
  void expand(std::int32_t node, std::span<const float> logits);

  /// The nodes to feed to the draft model next, best first: among the children created since
  /// the last call, the `branching` highest-scoring ones that are shallower than the depth
  /// limit, have path probability >= min_confidence, and rank among the max_nodes best nodes
  /// so far (a node outside them can never enter the final tree, nor can its descendants,
  /// whose scores are lower).
  std::vector<std::int32_t> frontier();

  std::int32_t token(std::int32_t node) const { return nodes_[static_cast<std::size_t>(node)].token; }
  /// -1 for a child of the root.
  std::int32_t parent(std::int32_t node) const { return nodes_[static_cast<std::size_t>(node)].parent; }
  /// 1 for a child of the root.
  std::int32_t depth(std::int32_t node) const { return depth_[static_cast<std::size_t>(node)]; }

  /// The max_nodes highest-scoring nodes (ties: the older node; so ancestor-closed), parents
  /// before children, siblings by decreasing score.
  DraftTree finish() const;

 private:
  bool better(std::int32_t a, std::int32_t b) const;  // higher score, then older
  std::vector<std::int32_t> path_history(std::int32_t node) const;
  void add_child(std::int32_t parent, std::int32_t token, double log_p,
                 std::vector<std::pair<std::int32_t, float>> q);

  const DraftRequest& request_;
  std::int32_t depth_limit_;
  float min_confidence_;
  bool sampled_;
  std::vector<DraftNode> nodes_;
  std::vector<double> score_;
  std::vector<std::int32_t> depth_;
  std::vector<std::int32_t> level_;  // children created since the last frontier()
};

}  // namespace peregrine

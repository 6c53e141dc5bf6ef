// Verification of a draft tree against the target model's logits, in one pass over the tree:
// greedy (accept while the draft token is the target's argmax) and stochastic speculative
// sampling (Leviathan et al. 2023; Chen et al. 2023), extended to trees by trying the
// children of a node one after another against the residual distribution (SpecInfer, Miao et
// al. 2024). Lossless: the emitted tokens are distributed exactly as plain sampling from the
// target would produce them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/draft_tree.h"

namespace peregrine {

struct VerifyResult {
  std::vector<std::int32_t> path;  // accepted node indices, the root's child first
  std::int32_t next_token = -1;    // drawn from the target after the path (correction or bonus)
};

/// `logits`: [1 + tree.size(), vocab] f32, row 0 = the target's logits after the root (the
/// last context token), row 1 + i = after node i. `history`: the context tokens (for the
/// repetition penalty; the path's tokens are appended as it descends). Draws from `sampler`'s
/// RNG and applies its SamplingParams identically to every row.
VerifyResult verify_draft(const DraftTree& tree, std::span<const float> logits, std::int64_t vocab,
                          std::span<const std::int32_t> history, Sampler& sampler);

}  // namespace peregrine

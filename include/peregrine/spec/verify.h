// Verification of a draft tree against the target model's logits, in one pass over the tree:
// greedy (accept while the draft token is the target's argmax) and stochastic speculative
// sampling (Leviathan et al. 2023; Chen et al. 2023), extended to trees by trying the
// children of a node one after another against the residual distribution (SpecInfer, Miao et
// al. 2024). Lossless: the emitted tokens are distributed exactly as plain sampling from the
// target would produce them.
//
// Why it is lossless. At a node whose target distribution is p, the children x_1, x_2, ... are
// tried in order against a residual r (r_0 = p). A sampled child x ~ q is accepted with
// probability min(1, r(x)/q(x)), so it is emitted as y with probability min(q(y), r(y)), and
// rejected with probability β = Σ max(0, r − q); on rejection the residual becomes
// r' = max(0, r − q) / β. Since r = min(q, r) + max(0, r − q), "accept, else continue from r'"
// emits y with probability exactly r(y) (Leviathan et al. 2023, Appendix A.1; Chen et al.
// 2023, Theorem 1). A deterministic child x (empty q) is the one-hot q = δ_x: accepted with
// probability r(x), and r' is r with r(x) set to 0, renormalized. Induction over the siblings
// (SpecInfer's multi-step speculative sampling, Miao et al. 2024) shows the token emitted at
// the node is distributed as p whichever child (or none) is accepted; when all are rejected
// it is drawn from the last residual. An accepted child's children are verified the same way
// against the target's distribution given the path, and a leaf emits a bonus token from p, so
// by induction over depth every emitted prefix is distributed as plain sampling would make it.
// Requirements on the drafter: a sampled child's token is a draw from its q that is
// independent of its siblings' tokens (SpecInfer samples siblings i.i.d.; a drafter wanting
// distinct siblings, e.g. the draft's top-k, marks them deterministic), and a deterministic
// child's token is a function of the path only. Greedy decoding (temperature 0) is the case
// p = one-hot on the argmax: acceptance probabilities are 0 or 1 and no RNG draw is made.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
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
/// RNG and applies its SamplingParams identically to every row
/// (Sampler::next_token_distribution, the distribution Sampler::sample draws from).
///
/// Walks from the root: at a node with target distribution p, tries its children in tree
/// order against the residual r (initially p): a sampled child (non-empty q) is accepted with
/// probability min(1, r(x)/q(x)), on rejection r ← norm(max(0, r − q)); a deterministic child
/// (empty q) is accepted with probability r(x), on rejection r(x) ← 0 and r is renormalized.
/// It descends into an accepted child; when every child is rejected, next_token is drawn from
/// r; at a leaf the bonus next_token is drawn from p. The emitted tokens are the path's tokens
/// then next_token (1 to depth + 1 tokens).
///
/// RNG use: one Sampler::uniform() per acceptance test whose probability is strictly between
/// 0 and 1 and one per draw from a distribution with more than one positive entry; none
/// otherwise (so greedy verification never touches the RNG).
///
/// Edge cases, all still lossless: a child token outside p's support (e.g. cut by top-k) has
/// r(x) = 0 and is rejected without a draw (a sampled one still updates r, as the proof
/// requires). A sampled child whose token has q(x) = 0 cannot have been drawn from q: it is
/// verified as a deterministic child (lossless for any candidate the verifier's RNG did not
/// choose). When float rounding leaves max(0, r − q) without positive mass (r ≈ q: the
/// rejection had probability ≈ 0), r is kept unchanged. A row whose distribution has no
/// positive mass (all logits NaN / -inf) gives its top candidate probability 1, the token
/// sample() returns for it. The result never holds an invalid token.
///
/// Errors (kInvalidArgument): vocab <= 0, logits.size() != (1 + tree.size()) * vocab, a node
/// whose parent is not an earlier node or -1, a token outside [0, vocab), a q entry with an
/// id outside [0, vocab) or a probability that is negative or not finite.
Expected<VerifyResult> verify_draft(const DraftTree& tree, std::span<const float> logits,
                                    std::int64_t vocab, std::span<const std::int32_t> history,
                                    Sampler& sampler);

}  // namespace peregrine

// Adaptive draft length: per request, pick the next step's draft budget k from the running
// per-token acceptance rate α and the cost of drafting, using the expected-speedup formula of
// Leviathan et al. 2023 (Fast Inference from Transformers via Speculative Decoding, §3.3):
// a step that drafts k tokens emits E[tokens] = (1 − α^(k+1)) / (1 − α) tokens and costs
// 1 + c·k target-step units, where c is the cost of one drafted token relative to one target
// step; k* maximizes E[tokens] / (1 + c·k).
#pragma once

#include <cstdint>

namespace peregrine {

/// α from a chain step: the acceptance of each drafted token is a Bernoulli trial until the
/// first rejection, so a step that accepted `accepted` of `drafted` tokens contributes
/// `accepted` successes and one failure when accepted < drafted. α = successes / trials, both
/// decayed by kDecay per step (an exponential moving window of ~10 steps).
class AdaptiveDraftLength {
 public:
  static constexpr double kDecay = 0.9;
  /// max_k >= 1: the request's draft_max. Starts optimistic (α = 0.8, as after a few full
  /// acceptances) so the first steps draft near max_k.
  explicit AdaptiveDraftLength(std::int32_t max_k);
  /// Records one verification step.
  void update(std::int64_t drafted, std::int64_t accepted);
  /// The running per-token acceptance rate α in [0, 1].
  double acceptance() const;
  /// k* in [1, max_k] for relative draft cost c >= 0 (0: drafting is free, e.g. prompt lookup).
  std::int32_t next(double draft_cost) const;
  /// Expected tokens per step for budget k at acceptance α (Leviathan et al. eq. 1).
  static double expected_tokens(double alpha, std::int32_t k);

 private:
  std::int32_t max_k_;
  double successes_ = 4.0, trials_ = 5.0;
};

}  // namespace peregrine

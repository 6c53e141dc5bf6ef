// Next-token selection from logits: repetition penalty, top-k, top-p (nucleus), min-p,
// temperature, and greedy; seeded so the same seed gives the same text.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// Sampling parameters (llama.cpp names and defaults where they exist).
struct SamplingParams {
  float temperature = 0.8f;     // 0 = greedy (argmax)
  std::int32_t top_k = 40;      // 0 = disabled (whole vocabulary)
  float top_p = 0.95f;          // 1 = disabled
  float min_p = 0.05f;          // 0 = disabled
  float repeat_penalty = 1.0f;  // 1 = disabled
  std::int32_t repeat_last_n = 64;  // window of recent tokens the penalty looks at
  std::uint64_t seed = 0;

  /// Errors (kInvalidArgument, naming the parameter): temperature < 0 or not finite,
  /// top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repeat_penalty <= 0,
  /// repeat_last_n < 0.
  Status validate() const;
};

/// Stateful sampler (owns the RNG: std::mt19937_64 seeded with params.seed).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

  /// Picks the next token from `logits` [vocab] f32 (modified in place: NaN → -inf, penalty).
  /// Pipeline: repetition penalty over the last repeat_last_n ids of `history` (CTRL, Keskar
  /// et al. 2019: positive logits divided, negative multiplied) → greedy argmax if
  /// temperature == 0 → top-k → softmax at temperature → top-p (smallest set with cumulative
  /// probability >= top_p; Holtzman et al. 2020) → min-p (drop p < min_p * p_max; Nguyen et
  /// al. 2024) → renormalize and draw.
  std::int32_t sample(std::span<float> logits, std::span<const std::int32_t> history);

  /// The distribution sample(logits, history) draws from, for raw `logits` [vocab] f32 (not
  /// modified: NaN → -inf and the penalty are applied to a copy): (id, probability) sorted by
  /// decreasing probability, summing to 1 up to float rounding; temperature 0 gives the argmax
  /// with probability 1. sample() runs the same steps (prepare, then distribution), so
  /// speculative verification (spec/verify.h) judges drafts against exactly the distribution
  /// plain decoding samples from.
  std::vector<std::pair<std::int32_t, float>> next_token_distribution(
      std::span<const float> logits, std::span<const std::int32_t> history) const;

  /// The candidate distribution of already prepared logits (the last step of
  /// next_token_distribution), as (id, probability) sorted by decreasing probability.
  /// `logits` must not contain NaN (prepare maps NaN to -inf).
  std::vector<std::pair<std::int32_t, float>> distribution(std::span<const float> logits) const;

  /// A uniform double in [0, 1) from the sampler's RNG: the draw sample() makes, also used by
  /// speculative verification for its accept/reject tests, so a request's whole output comes
  /// from one seeded stream.
  double uniform();

  const SamplingParams& params() const { return params_; }

  /// The in-place first steps of sample(): NaN → -inf, then the repetition penalty over the
  /// last repeat_last_n ids of `history` (drafters rank their candidates on these logits).
  void prepare(std::span<float> logits, std::span<const std::int32_t> history) const;

 private:
  void apply_repeat_penalty(std::span<float> logits, std::span<const std::int32_t> history) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
};

/// Index of the largest logit (lowest index on ties).
std::int32_t argmax(std::span<const float> logits);

}  // namespace peregrine

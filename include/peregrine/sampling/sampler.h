// Next-token selection from logits: logit bias, repetition / presence / frequency penalties,
// top-k, top-p (nucleus), min-p, temperature, and greedy; seeded so the same seed gives the
// same text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
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
  float presence_penalty = 0.0f;   // subtracted once from each token in the window; 0 = disabled
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the window; 0 = disabled
  std::int32_t repeat_last_n = 64;  // window of recent tokens the penalties look at; -1 = all
  std::vector<std::pair<std::int32_t, float>> logit_bias;  // (token id, added to its logit)
  std::uint64_t seed = 0;

  /// Errors (kInvalidArgument, naming the parameter): temperature < 0 or not finite,
  /// top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repeat_penalty <= 0,
  /// presence_penalty / frequency_penalty outside [-2, 2] (OpenAI's range), repeat_last_n < -1,
  /// a logit_bias id < 0 or bias not finite (ids past the vocabulary are the caller's to check:
  /// the sampler ignores them).
  Status validate() const;

  /// Whether a penalty changes any logit (one of them set, and a window that is not 0).
  bool penalizes() const;

  /// How many of the last `n_history` tokens the penalties look at (repeat_last_n, -1: all).
  std::size_t penalty_window(std::size_t n_history) const;
};

/// Stateful sampler (owns the RNG: std::mt19937_64 seeded with params.seed).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

  /// Picks the next token from `logits` [vocab] f32 (modified in place: NaN → -inf, bias,
  /// penalties). Pipeline: logit bias added → penalties over the last repeat_last_n ids of
  /// `history` (the repetition penalty of CTRL, Keskar et al. 2019: positive logits divided,
  /// negative multiplied; then OpenAI's presence and frequency penalties: logit −= c ·
  /// frequency_penalty + (c > 0) · presence_penalty for a token seen c times; llama.cpp's
  /// penalties sampler, one window for all three) → greedy argmax if
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

  /// The in-place first steps of sample(): NaN → -inf, the logit bias, then the penalties over
  /// the last repeat_last_n ids of `history` (drafters rank their candidates on these logits).
  void prepare(std::span<float> logits, std::span<const std::int32_t> history) const;

 private:
  void apply_penalties(std::span<float> logits, std::span<const std::int32_t> history) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
};

/// Index of the largest logit (lowest index on ties).
std::int32_t argmax(std::span<const float> logits);

}  // namespace peregrine

// Log-probabilities of tokens for the OpenAI `logprobs` fields.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace peregrine {

/// The log-softmax of `logits` [vocab] f32 (temperature 1, no penalties) at `token`, and the
/// `top_n` largest entries as (id, logprob), most likely first (ties: lower id first). In
/// nats, computed in f64. Preconditions: logits not empty, 0 <= token < logits.size(),
/// top_n >= 0 (clamped to the vocabulary size).
std::pair<float, std::vector<std::pair<std::int32_t, float>>> token_logprobs(
    std::span<const float> logits, std::int32_t token, std::int32_t top_n);

}  // namespace peregrine

#include "peregrine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace peregrine {

std::pair<float, std::vector<std::pair<std::int32_t, float>>> token_logprobs(
    std::span<const float> logits, std::int32_t token, std::int32_t top_n) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  auto logprob = [&](std::int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<std::size_t>(id)]) - log_z);
  };
  const auto n = static_cast<std::size_t>(std::clamp<std::int64_t>(top_n, 0, static_cast<std::int64_t>(logits.size())));
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  std::vector<std::pair<std::int32_t, float>> top;
  top.reserve(n);
  for (std::size_t i = 0; i < n; ++i) top.emplace_back(ids[i], logprob(ids[i]));
  return {logprob(token), std::move(top)};
}

}  // namespace peregrine

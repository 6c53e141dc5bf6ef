#include "peregrine/spec/adaptive_draft.h"

#include <algorithm>
#include <cmath>

namespace peregrine {

AdaptiveDraftLength::AdaptiveDraftLength(std::int32_t max_k) : max_k_(std::max(1, max_k)) {}

void AdaptiveDraftLength::update(std::int64_t drafted, std::int64_t accepted) {
  if (drafted <= 0) return;
  successes_ = kDecay * successes_ + static_cast<double>(accepted);
  trials_ = kDecay * trials_ + static_cast<double>(accepted) + (accepted < drafted ? 1.0 : 0.0);
}

double AdaptiveDraftLength::acceptance() const { return trials_ > 0 ? successes_ / trials_ : 0.0; }

double AdaptiveDraftLength::expected_tokens(double alpha, std::int32_t k) {
  if (alpha >= 1.0) return static_cast<double>(k) + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

std::int32_t AdaptiveDraftLength::next(double draft_cost) const {
  const double alpha = acceptance(), c = std::max(0.0, draft_cost);
  std::int32_t best = 1;
  double best_rate = 0.0;
  for (std::int32_t k = 1; k <= max_k_; ++k) {
    const double rate = expected_tokens(alpha, k) / (1.0 + c * k);
    if (rate > best_rate + 1e-12) best = k, best_rate = rate;
  }
  return best;
}

}  // namespace peregrine

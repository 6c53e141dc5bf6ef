#include "peregrine/engine/metrics.h"

#include <algorithm>

namespace peregrine {

Histogram Histogram::latency_seconds() {
  Histogram h;
  h.bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
              0.75,  1.0,    2.5,   5.0,  10.0,  20.0, 30.0,  60.0};
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), value);  // first bound >= value
  ++counts[static_cast<std::size_t>(it - bounds.begin())];
  sum += value;
  ++count;
}

double Histogram::quantile(double q) const {
  if (count == 0) return 0.0;
  const double rank = q * static_cast<double>(count);
  double below = 0.0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    const auto c = static_cast<double>(counts[b]);
    if (below + c >= rank && c > 0) {
      const double lo = b == 0 ? 0.0 : bounds[b - 1];
      const double hi = b < bounds.size() ? bounds[b] : bounds.back();
      return lo + (hi - lo) * (rank - below) / c;
    }
    below += c;
  }
  return bounds.back();
}

double EngineMetrics::prefix_hit_rate() const {
  return prefix_tokens_queried == 0 ? 0.0
                                    : static_cast<double>(prefix_tokens_hit) / static_cast<double>(prefix_tokens_queried);
}

double EngineMetrics::spec_acceptance_rate() const {
  return spec_draft_tokens_total > 0
             ? static_cast<double>(spec_accepted_tokens_total) / static_cast<double>(spec_draft_tokens_total)
             : 0.0;
}

double EngineMetrics::spec_tokens_per_step() const {
  return spec_steps_total > 0
             ? static_cast<double>(spec_accepted_tokens_total + spec_steps_total) / static_cast<double>(spec_steps_total)
             : 0.0;
}

}  // namespace peregrine

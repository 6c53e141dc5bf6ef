#include "peregrine/eval/pareto_front.h"

#include <algorithm>

namespace peregrine {
namespace {

/// The cost axis as "higher is better".
double gain(const ParetoPoint& p, ParetoAxis axis) { return axis == ParetoAxis::kSpeed ? p.decode_tps : -p.weight_bytes; }

bool dominates(const ParetoPoint& a, const ParetoPoint& b, ParetoAxis axis) {
  const double ga = gain(a, axis), gb = gain(b, axis);
  return a.kld <= b.kld && ga >= gb && (a.kld < b.kld || ga > gb);
}

}  // namespace

std::vector<std::size_t> pareto_front(const std::vector<ParetoPoint>& points, ParetoAxis axis) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const bool dominated = std::any_of(points.begin(), points.end(), [&](const ParetoPoint& q) { return dominates(q, points[i], axis); });
    if (!dominated) front.push_back(i);
  }
  std::sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
    return points[a].kld != points[b].kld ? points[a].kld < points[b].kld : gain(points[a], axis) > gain(points[b], axis);
  });
  return front;
}

std::optional<std::size_t> recommend(const std::vector<ParetoPoint>& points, const QualityBudget& budget) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const ParetoPoint& p = points[i];
    if (budget.max_kld && p.kld > *budget.max_kld) continue;
    if (budget.max_ppl_increase_pct && p.ppl_increase_pct() > *budget.max_ppl_increase_pct) continue;
    const bool better = !best || p.decode_tps > points[*best].decode_tps ||
                        (p.decode_tps == points[*best].decode_tps && p.weight_bytes < points[*best].weight_bytes);
    if (better) best = i;
  }
  return best;
}

}  // namespace peregrine

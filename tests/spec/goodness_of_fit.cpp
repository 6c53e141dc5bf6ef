#include "goodness_of_fit.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace peregrine::test {

double gamma_q(double a, double x) {
  constexpr int kMaxTerms = 10000;
  constexpr double kEps = 1e-15;
  if (x <= 0.0) return 1.0;
  const double prefix = std::exp(a * std::log(x) - x - std::lgamma(a));  // x^a e^-x / Γ(a)
  if (x < a + 1.0) {  // P(a, x) = prefix · Σ_n x^n / (a (a + 1) ... (a + n)); Q = 1 − P
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < kMaxTerms && term > sum * kEps; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - prefix * sum;
  }
  // Q(a, x) = prefix · 1 / (x + 1 − a − 1·(1 − a) / (x + 3 − a − 2·(2 − a) / (x + 5 − a − ...)))
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / kTiny, d = 1.0 / b, h = d;
  for (int i = 1; i < kMaxTerms; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    if (std::abs(d * c - 1.0) < kEps) break;
  }
  return prefix * h;
}

double chi_square_p_value(double statistic, std::int64_t dof) {
  return gamma_q(0.5 * static_cast<double>(dof), 0.5 * statistic);
}

GoodnessOfFit goodness_of_fit(const std::map<std::int64_t, std::int64_t>& counts,
                              const std::map<std::int64_t, double>& probs) {
  GoodnessOfFit g;
  for (const auto& [outcome, count] : counts) g.n += count;
  if (g.n == 0) return g;
  const double n = static_cast<double>(g.n);
  struct Bin {
    double p = 0.0;
    std::int64_t observed = 0;
  };
  std::vector<Bin> own;
  Bin pooled{1.0, g.n};
  for (const auto& [outcome, p] : probs) {
    if (n * p < 5.0) continue;
    const auto it = counts.find(outcome);
    own.push_back({p, it == counts.end() ? 0 : it->second});
    pooled.p -= p;
    pooled.observed -= own.back().observed;
  }
  pooled.p = std::max(pooled.p, 0.0);
  std::sort(own.begin(), own.end(), [](const Bin& a, const Bin& b) { return a.p > b.p; });
  while (n * pooled.p < 5.0 && !own.empty()) {
    pooled.p += own.back().p;
    pooled.observed += own.back().observed;
    own.pop_back();
  }
  own.push_back(pooled);
  g.bins = static_cast<std::int64_t>(own.size());
  double spread = 0.0;  // Σ sqrt(P (1 − P) / n)
  for (const Bin& b : own) {
    const double expected = n * b.p, diff = static_cast<double>(b.observed) - expected;
    g.statistic += diff * diff / expected;
    g.tv += 0.5 * std::abs(static_cast<double>(b.observed) / n - b.p);
    spread += std::sqrt(b.p * (1.0 - b.p) / n);
  }
  g.p_value = g.bins > 1 ? chi_square_p_value(g.statistic, g.bins - 1) : 1.0;
  g.tv_bound = 0.5 * spread + std::sqrt(std::log(1e6) / (2.0 * n));
  return g;
}

}  // namespace peregrine::test

// Pearson's chi-square goodness-of-fit test and a total-variation bound, for the statistical
// tests of speculative verification (tests/spec/verify_test.cpp).
#pragma once

#include <cstdint>
#include <map>

namespace peregrine::test {

/// Q(a, x) = Γ(a, x) / Γ(a), the upper regularized incomplete gamma function, for a > 0 and
/// x >= 0: its power series for x < a + 1, the Lentz continued fraction otherwise (Numerical
/// Recipes, 3rd ed., §6.2). Relative accuracy about 1e-14.
double gamma_q(double a, double x);

/// P(X >= statistic) for X ~ χ² with `dof` >= 1 degrees of freedom: Q(dof / 2, statistic / 2).
double chi_square_p_value(double statistic, std::int64_t dof);

struct GoodnessOfFit {
  std::int64_t n = 0;         // draws
  std::int64_t bins = 0;      // after pooling
  double statistic = 0.0;     // Pearson's Σ (observed − expected)² / expected over the bins
  double p_value = 1.0;       // P(χ²_{bins − 1} >= statistic); 1 when there is one bin
  double tv = 0.0;            // ½ Σ |observed / n − P| over the bins
  double tv_bound = 0.0;      // what tv stays below with probability >= 1 − 1e-6 (see below)
};

/// Tests observed categorical draws (`counts`: outcome → count, n = Σ counts) against the
/// hypothesized probabilities `probs` (outcome → probability; outcomes missing from it have
/// probability unknown but together at most 1 − Σ probs).
///
/// Binning (the standard rule that keeps every expected count >= 5 so the χ² approximation
/// holds): each outcome with n·P >= 5 is its own bin; all other outcomes, observed or not,
/// share one pooled bin of probability 1 − Σ(own bins' P); while the pooled bin expects fewer
/// than 5 draws, the smallest own bin is merged into it.
///
/// Total variation over those bins: for a correct sampler E|observed_b / n − P_b| <=
/// sqrt(P_b (1 − P_b) / n) (Jensen), and tv changes by at most 1/n when one draw changes, so
/// by McDiarmid's inequality P(tv >= ½ Σ_b sqrt(P_b (1 − P_b) / n) + t) <= exp(−2 n t²);
/// tv_bound takes t = sqrt(ln(1e6) / (2 n)).
GoodnessOfFit goodness_of_fit(const std::map<std::int64_t, std::int64_t>& counts,
                              const std::map<std::int64_t, double>& probs);

}  // namespace peregrine::test

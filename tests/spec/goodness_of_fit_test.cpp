// The chi-square / total-variation helper of the verification tests, against known values.
#include "goodness_of_fit.h"

#include <gtest/gtest.h>

#include <cmath>

namespace peregrine::test {
namespace {

TEST(GoodnessOfFit, ChiSquarePValuesMatchTables) {
  // Quantiles from standard χ² tables (to 16 digits: scipy.stats.chi2.ppf); upper tails
  // checked with mpmath.gammainc(dof / 2, x / 2, inf, regularized=True).
  struct Case {
    double x;
    std::int64_t dof;
    double p;
  };
  for (const Case c : {Case{3.841458820694124, 1, 0.05}, Case{6.6348966010212145, 1, 0.01},
                       Case{18.307038053275146, 10, 0.05}, Case{124.34211340400407, 100, 0.05},
                       Case{59.70306, 30, 0.00100000119578919}, Case{1.0, 5, 0.962565773247296},
                       Case{250.0, 200, 0.00937913166882610}, Case{5.0, 20, 0.999722647905379},
                       Case{2.0, 2, std::exp(-1.0)}, Case{0.0, 7, 1.0}}) {
    EXPECT_NEAR(chi_square_p_value(c.x, c.dof), c.p, 1e-10 * c.p)
        << "x " << c.x << " dof " << c.dof;
  }
  EXPECT_NEAR(gamma_q(1.0, 3.0), std::exp(-3.0), 1e-15);  // Q(1, x) = e^-x
  EXPECT_LT(chi_square_p_value(500.0, 10), 1e-90);         // far tail: no cancellation
  EXPECT_GT(chi_square_p_value(500.0, 10), 0.0);
}

TEST(GoodnessOfFit, ExactCountsFitPerfectly) {
  const auto g = goodness_of_fit({{0, 500}, {1, 300}, {2, 200}}, {{0, 0.5}, {1, 0.3}, {2, 0.2}});
  EXPECT_EQ(g.n, 1000);
  EXPECT_EQ(g.bins, 3);  // the pooled bin expects 0 draws: it absorbed the smallest own bin
  EXPECT_NEAR(g.statistic, 0.0, 1e-9);
  EXPECT_NEAR(g.p_value, 1.0, 1e-9);
  EXPECT_NEAR(g.tv, 0.0, 1e-12);
}

TEST(GoodnessOfFit, PoolsRareOutcomesAndUnknownOnes) {
  // n = 1000: outcomes 2 and 3 expect 3 and 1 draws, so they join the pooled bin with the
  // unlisted outcome 9 (pooled P = 1 − 0.6 − 0.3 = 0.1, expected 100 >= 5).
  const auto g = goodness_of_fit({{0, 610}, {1, 290}, {2, 40}, {9, 60}},
                                 {{0, 0.6}, {1, 0.3}, {2, 0.003}, {3, 0.001}});
  EXPECT_EQ(g.bins, 3);
  const double expected = 10.0 * 10.0 / 600.0 + 10.0 * 10.0 / 300.0 + 0.0;  // pooled: 100 vs 100
  EXPECT_NEAR(g.statistic, expected, 1e-9);
  EXPECT_NEAR(g.p_value, std::exp(-expected / 2.0), 1e-12);  // 2 dof: Q(1, x/2) = e^{-x/2}
  EXPECT_NEAR(g.tv, 0.01, 1e-12);
  EXPECT_NEAR(g.tv_bound, 0.5 * (std::sqrt(0.24) + std::sqrt(0.21) + std::sqrt(0.09)) / std::sqrt(1000.0) +
                              std::sqrt(std::log(1e6) / 2000.0), 1e-12);
}

}  // namespace
}  // namespace peregrine::test

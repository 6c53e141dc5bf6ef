// AdaptiveDraftLength: Leviathan et al.'s expected-token formula, the acceptance estimate, and
// the budget it picks as acceptance and draft cost change.
#include "peregrine/spec/adaptive_draft.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(AdaptiveDraftLength, ExpectedTokensFormula) {
  EXPECT_DOUBLE_EQ(AdaptiveDraftLength::expected_tokens(0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(AdaptiveDraftLength::expected_tokens(1.0, 4), 5.0);
  EXPECT_NEAR(AdaptiveDraftLength::expected_tokens(0.5, 3), 1.0 + 0.5 + 0.25 + 0.125, 1e-12);
}

TEST(AdaptiveDraftLength, HighAcceptanceDraftsLongLowAcceptanceShort) {
  AdaptiveDraftLength good(8), bad(8);
  for (int i = 0; i < 30; ++i) {
    good.update(8, 8);
    bad.update(8, 0);
  }
  EXPECT_GT(good.acceptance(), 0.95);
  EXPECT_LT(bad.acceptance(), 0.05);
  EXPECT_EQ(good.next(0.05), 8);
  EXPECT_EQ(bad.next(0.05), 1);
  EXPECT_EQ(good.next(0.0), 8);
}

TEST(AdaptiveDraftLength, CostlierDraftsShortenTheBudget) {
  AdaptiveDraftLength a(16);
  for (int i = 0; i < 30; ++i) a.update(4, 2);  // α = 2 / 3
  EXPECT_NEAR(a.acceptance(), 2.0 / 3.0, 0.02);
  const std::int32_t cheap = a.next(0.01), dear = a.next(0.3);
  EXPECT_GT(cheap, dear);
  // k* maximizes the rate: no neighbour does better.
  auto rate = [&](std::int32_t k, double c) { return AdaptiveDraftLength::expected_tokens(a.acceptance(), k) / (1 + c * k); };
  EXPECT_GE(rate(dear, 0.3), rate(dear + 1, 0.3));
  if (dear > 1) {
    EXPECT_GE(rate(dear, 0.3), rate(dear - 1, 0.3));
  }
}

}  // namespace
}  // namespace peregrine

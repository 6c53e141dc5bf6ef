// ForwardCostModel: recovers a linear cost, handles a single row count, clamps negative slopes.
#include "peregrine/spec/forward_cost_model.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(ForwardCostModel, RecoversALinearCost) {
  ForwardCostModel m;
  for (int i = 0; i < 200; ++i) {
    const std::int64_t rows = 1 + i % 7;
    m.observe(rows, 0.010 + 0.002 * static_cast<double>(rows));
  }
  EXPECT_NEAR(m.seconds_per_row(), 0.002, 1e-9);
  EXPECT_NEAR(m.seconds(1), 0.012, 1e-9);
  EXPECT_NEAR(m.seconds(5), 0.020, 1e-9);
}

TEST(ForwardCostModel, OneRowCountGivesTheMeanAndNoSlope) {
  ForwardCostModel m;
  EXPECT_EQ(m.seconds(1), 0.0);
  m.observe(1, 0.004);
  m.observe(1, 0.006);
  EXPECT_EQ(m.seconds_per_row(), 0.0);
  EXPECT_NEAR(m.seconds(3), 0.005, 1e-3);
}

TEST(ForwardCostModel, NoisyDecreasingTimesClampTheSlopeAtZero) {
  ForwardCostModel m;
  for (int i = 0; i < 50; ++i) {
    m.observe(1, 0.010);
    m.observe(4, 0.009);
  }
  EXPECT_EQ(m.seconds_per_row(), 0.0);
}

}  // namespace
}  // namespace peregrine

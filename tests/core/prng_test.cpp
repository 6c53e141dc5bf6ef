// SplitMix64 / FNV-1a against their published values; xoshiro256+ uniform fill: range,
// moments, determinism, odd lengths.
#include "peregrine/core/prng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace peregrine {
namespace {

TEST(Prng, SplitMix64FromZeroMatchesTheReferenceSequence) {
  std::uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ull);
}

TEST(Prng, Fnv1a64MatchesTheReferenceValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(Prng, UniformFillIsInRangeWithTheRightMoments) {
  std::vector<float> v(100001);  // odd: the last value comes from a draw of its own
  Xoshiro256Plus(42).fill_uniform(v, 2.0f);
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    ASSERT_GE(x, -2.0f);
    ASSERT_LT(x, 2.0f);
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  // Uniform on [-2, 2): mean 0, variance 4/3; the sample mean's std is sqrt(4/3 / n) ≈ 0.0037.
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n, 4.0 / 3.0, 0.02);
}

TEST(Prng, SameSeedSameValuesOtherSeedOtherValues) {
  std::vector<float> a(33), b(33), c(33);
  Xoshiro256Plus(7).fill_uniform(a, 1.0f);
  Xoshiro256Plus(7).fill_uniform(b, 1.0f);
  Xoshiro256Plus(8).fill_uniform(c, 1.0f);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace peregrine

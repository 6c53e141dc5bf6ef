#include "peregrine/kernels/cpu/matmul/token_quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

std::vector<float> random_rows(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * in));
  for (auto& v : x) v = normal(rng);
  return x;
}

TEST(QuantizeTokens, SimdMatchesScalarTwinExactly) {
  std::mt19937 rng(91);
  for (std::int64_t in : {1, 7, 33, 172, 300}) {
    for (std::int64_t n_tokens : {1, 3, 9}) {
      for (float threshold : {0.0f, 3.0f, 6.0f}) {
        const auto x = random_rows(n_tokens, in, rng);
        TokenQuantizedActivations ref;
        quantize_tokens_reference(x, n_tokens, in, threshold, ref);
        test::for_each_simd_target([&] {
          TokenQuantizedActivations out;
          quantize_tokens(x, n_tokens, in, threshold, out);
          EXPECT_EQ(out.outliers, ref.outliers);
          EXPECT_EQ(out.scale, ref.scale);
          EXPECT_EQ(out.q, ref.q) << "in=" << in << " n_tokens=" << n_tokens << " threshold=" << threshold;
        });
      }
    }
  }
}

TEST(QuantizeTokens, PerTokenAbsmaxScaleAndHalfStepError) {
  std::mt19937 rng(92);
  const std::int64_t in = 172, n_tokens = 4;
  const auto x = random_rows(n_tokens, in, rng);
  TokenQuantizedActivations q;
  quantize_tokens(x, n_tokens, in, 0.0f, q);
  EXPECT_TRUE(q.outliers.empty());
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < in; ++i) amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(t * in + i)]));
    const float s = q.scale[static_cast<std::size_t>(t)];
    EXPECT_EQ(s, amax / 127.0f);
    for (std::int64_t i = 0; i < in; ++i) {
      const auto k = static_cast<std::size_t>(t * in + i);
      EXPECT_LE(std::abs(q.q[k]), 127);
      EXPECT_LE(std::fabs(x[k] - s * q.q[k]), 0.5 * s * (1.0 + 1e-4)) << t << " " << i;
    }
  }
}

TEST(QuantizeTokens, OutlierColumnsAreExcludedFromTheInt8Part) {
  // Column 2 reaches the threshold in token 1 only: it is an outlier column for every token.
  // The other columns' maxima 127 and 254 give exact scales 1 and 2 (ties round to even).
  const std::int64_t in = 5, n_tokens = 2;
  const std::vector<float> x = {63.5f, -127.0f, 3.0f, 31.25f, 0.0f,
                                1.0f, 3.0f, -300.0f, 254.0f, 2.5f};
  TokenQuantizedActivations q;
  quantize_tokens(x, n_tokens, in, 255.0f, q);
  EXPECT_EQ(q.outliers, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(q.scale, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(q.q, (std::vector<std::int8_t>{64, -127, 0, 31, 0, 0, 2, 0, 127, 1}));
  TokenQuantizedActivations none;
  quantize_tokens(x, n_tokens, in, 0.0f, none);
  EXPECT_TRUE(none.outliers.empty());
  EXPECT_EQ(none.scale[1], 300.0f / 127.0f);
}

TEST(QuantizeTokens, ZeroTokenHasZeroScaleAndCodes) {
  const std::vector<float> x(64, 0.0f);
  TokenQuantizedActivations q;
  quantize_tokens(x, 2, 32, 0.0f, q);
  EXPECT_EQ(q.scale, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_TRUE(std::all_of(q.q.begin(), q.q.end(), [](std::int8_t v) { return v == 0; }));
}

}  // namespace
}  // namespace peregrine

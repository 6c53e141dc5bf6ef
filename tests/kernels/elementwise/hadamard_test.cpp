#include "peregrine/kernels/cpu/elementwise/hadamard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace peregrine {
namespace {

constexpr std::int64_t kSizes[] = {1, 64, 172, 2048, 5632};

std::vector<float> random_rows(std::int64_t n_rows, std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n_rows * n));
  for (auto& v : x) v = normal(rng);
  return x;
}

// The power-of-two blocks of a row (binary expansion of n, largest first), as the header says.
std::vector<std::int64_t> blocks(std::int64_t n) {
  std::vector<std::int64_t> b;
  for (int bit = 62; bit >= 0; --bit) {
    if (n & (std::int64_t{1} << bit)) b.push_back(std::int64_t{1} << bit);
  }
  return b;
}

// Per block of size m: the butterflies add log2(m) levels, each rounding a partial sum of
// magnitude <= Σ|x_j| (over the block), and the 1/sqrt(m) factor (rounded) multiplies once, so
// |fast_i − exact_i| <= (log2(m) + 3)·u·Σ_j|x_j| / sqrt(m); the reference rounds its f64 result
// once (<= u·|ref_i|).
double block_bound(const float* x, std::int64_t m) {
  double s = 0.0;
  for (std::int64_t j = 0; j < m; ++j) s += std::fabs(x[j]);
  return (std::log2(static_cast<double>(m)) + 3.0) * std::ldexp(1.0, -24) * s / std::sqrt(static_cast<double>(m));
}

TEST(Hadamard, MatchesReferenceTwin) {
  std::mt19937 rng(101);
  for (std::int64_t n : kSizes) {
    const std::int64_t n_rows = n >= 2048 ? 1 : 3;
    const auto x = random_rows(n_rows, n, rng);
    auto fast = x, ref = x;
    hadamard_transform(fast.data(), n_rows, n);
    hadamard_transform_reference(ref.data(), n_rows, n);
    for (std::int64_t r = 0; r < n_rows; ++r) {
      std::int64_t offset = 0;
      for (std::int64_t m : blocks(n)) {
        const double bound = block_bound(x.data() + r * n + offset, m);
        for (std::int64_t i = offset; i < offset + m; ++i) {
          const auto k = static_cast<std::size_t>(r * n + i);
          ASSERT_NEAR(fast[k], ref[k], bound + std::ldexp(std::fabs(ref[k]), -24)) << "n=" << n << " row " << r << " i " << i;
        }
        offset += m;
      }
    }
  }
}

TEST(Hadamard, HandComputedBlocks) {
  // n = 1: identity. n = 2: [a + b, a − b]/√2. n = 4, e_0: all 1/2. n = 6 = 4 + 2: two blocks.
  std::vector<float> x1 = {-3.5f};
  hadamard_transform(x1.data(), 1, 1);
  EXPECT_EQ(x1[0], -3.5f);
  std::vector<float> x2 = {3.0f, 1.0f};
  hadamard_transform_reference(x2.data(), 1, 2);
  EXPECT_FLOAT_EQ(x2[0], 4.0f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(x2[1], 2.0f / std::sqrt(2.0f));
  std::vector<float> x6 = {1, 0, 0, 0, 1, 1};
  auto ref6 = x6;
  hadamard_transform(x6.data(), 1, 6);
  hadamard_transform_reference(ref6.data(), 1, 6);
  const std::vector<float> expected = {0.5f, 0.5f, 0.5f, 0.5f, std::sqrt(2.0f), 0.0f};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(x6[i], expected[i]) << i;
    EXPECT_FLOAT_EQ(ref6[i], expected[i]) << i;
  }
}

// The transform is orthogonal and symmetric: H(Hx) = x. Per block, the first pass leaves errors
// e1 with |e1_i| <= b = (log2(m) + 3)·u·Σ|x|/√m; H maps them to at most √m·b each (|H_ij| =
// 1/√m, m of them), and the second pass adds its own rounding, at most
// (log2(m) + 3)·u·Σ|Hx|/√m <= (log2(m) + 3)·u·Σ|x| (Σ|Hx| <= √m·‖x‖₂ <= √m·Σ|x|) = √m·b:
// |H(Hx)_i − x_i| <= 2·√m·b (to first order; u² terms are below the slack of 1.01).
TEST(Hadamard, AppliedTwiceGivesTheInputAndPreservesTheNorm) {
  std::mt19937 rng(102);
  for (std::int64_t n : kSizes) {
    const std::int64_t n_rows = 2;
    const auto x = random_rows(n_rows, n, rng);
    auto y = x;
    hadamard_transform(y.data(), n_rows, n);
    // ‖Hx‖₂ = ‖x‖₂ up to the rounding of the first pass: |‖y‖ − ‖x‖| <= ‖e1‖₂ <= √m·b per block.
    for (std::int64_t r = 0; r < n_rows; ++r) {
      double nx = 0.0, ny = 0.0, slack = 0.0;
      std::int64_t offset = 0;
      for (std::int64_t m : blocks(n)) {
        slack += std::sqrt(static_cast<double>(m)) * block_bound(x.data() + r * n + offset, m);
        offset += m;
      }
      for (std::int64_t i = 0; i < n; ++i) {
        nx += static_cast<double>(x[static_cast<std::size_t>(r * n + i)]) * x[static_cast<std::size_t>(r * n + i)];
        ny += static_cast<double>(y[static_cast<std::size_t>(r * n + i)]) * y[static_cast<std::size_t>(r * n + i)];
      }
      EXPECT_NEAR(std::sqrt(ny), std::sqrt(nx), 1.01 * slack) << "n=" << n;
    }
    hadamard_transform(y.data(), n_rows, n);
    for (std::int64_t r = 0; r < n_rows; ++r) {
      std::int64_t offset = 0;
      for (std::int64_t m : blocks(n)) {
        const double bound = 2.02 * std::sqrt(static_cast<double>(m)) * block_bound(x.data() + r * n + offset, m);
        for (std::int64_t i = offset; i < offset + m; ++i) {
          const auto k = static_cast<std::size_t>(r * n + i);
          ASSERT_NEAR(y[k], x[k], bound) << "n=" << n << " row " << r << " i " << i;
        }
        offset += m;
      }
    }
  }
}

}  // namespace
}  // namespace peregrine

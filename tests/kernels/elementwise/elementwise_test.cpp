#include "peregrine/kernels/cpu/elementwise/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

constexpr std::int64_t kLengths[] = {1, 7, 33, 172};

TEST(RmsNorm, MatchesFormula) {
  std::mt19937 rng(1);
  for (std::int64_t n : kLengths) {
    for (float eps : {1e-5f, 1e-6f, 0.5f}) {
      const auto x = random_vec(static_cast<std::size_t>(n), rng, 3.0f);
      const auto w = random_vec(static_cast<std::size_t>(n), rng);
      std::vector<float> out(static_cast<std::size_t>(n));
      rmsnorm(x.data(), w.data(), out.data(), n, eps);
      double ms = 0.0;
      for (float v : x) ms += static_cast<double>(v) * v;
      ms /= static_cast<double>(n);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double expected = x[i] / std::sqrt(ms + eps) * w[i];
        EXPECT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-7) << "n=" << n << " i=" << i;
      }
      // In place (out aliases x) gives the same result.
      auto y = x;
      rmsnorm(y.data(), w.data(), y.data(), n, eps);
      EXPECT_EQ(y, out);
    }
  }
}

TEST(RmsNorm, UnitWeightsGiveUnitRms) {
  std::mt19937 rng(2);
  const auto x = random_vec(172, rng, 100.0f);
  const std::vector<float> w(172, 1.0f);
  std::vector<float> out(172);
  rmsnorm(x.data(), w.data(), out.data(), 172, 0.0f);
  double ms = 0.0;
  for (float v : out) ms += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(ms / 172.0), 1.0, 1e-6);
}

TEST(Rope, PositionZeroIsIdentity) {
  std::mt19937 rng(3);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (std::int64_t hd : {2, 8, 64}) {
      const auto x = random_vec(static_cast<std::size_t>(3 * hd), rng);
      auto y = x;
      rope(y.data(), 3, hd, 0, 10000.0f, style);
      EXPECT_EQ(y, x);
    }
  }
}

TEST(Rope, PreservesEachPairNorm) {
  std::mt19937 rng(4);
  const std::int64_t n_heads = 3, hd = 64;
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (std::int32_t pos : {1, 7, 333, 4095}) {
      const auto x = random_vec(static_cast<std::size_t>(n_heads * hd), rng);
      auto y = x;
      rope(y.data(), n_heads, hd, pos, 10000.0f, style);
      for (std::int64_t h = 0; h < n_heads; ++h) {
        for (std::int64_t i = 0; i < hd / 2; ++i) {
          const std::int64_t a = h * hd + (style == RopeStyle::kInterleaved ? 2 * i : i);
          const std::int64_t b = h * hd + (style == RopeStyle::kInterleaved ? 2 * i + 1 : i + hd / 2);
          const double before = std::hypot(x[static_cast<std::size_t>(a)], x[static_cast<std::size_t>(b)]);
          const double after = std::hypot(y[static_cast<std::size_t>(a)], y[static_cast<std::size_t>(b)]);
          EXPECT_NEAR(after, before, 1e-6 * before + 1e-7) << "pos=" << pos << " pair " << i;
        }
      }
    }
  }
}

TEST(Rope, InterleavedAndNeoxAgreeAfterPermutingDims) {
  // Interleaved pair i = dims (2i, 2i+1); NeoX pair i = dims (i, i + hd/2). Same frequencies.
  std::mt19937 rng(5);
  const std::int64_t n_heads = 2;
  for (std::int64_t hd : {2, 8, 64}) {
    for (std::int32_t pos : {1, 17, 1000}) {
      const auto inter = random_vec(static_cast<std::size_t>(n_heads * hd), rng);
      std::vector<float> neox(inter.size());
      auto perm = [&](const std::vector<float>& src, std::vector<float>& dst) {
        for (std::int64_t h = 0; h < n_heads; ++h) {
          for (std::int64_t i = 0; i < hd / 2; ++i) {
            dst[static_cast<std::size_t>(h * hd + i)] = src[static_cast<std::size_t>(h * hd + 2 * i)];
            dst[static_cast<std::size_t>(h * hd + i + hd / 2)] = src[static_cast<std::size_t>(h * hd + 2 * i + 1)];
          }
        }
      };
      perm(inter, neox);
      test::for_each_simd_target([&] {  // vector body and tails round alike on every target
        auto a = inter, b = neox;
        rope(a.data(), n_heads, hd, pos, 10000.0f, RopeStyle::kInterleaved);
        rope(b.data(), n_heads, hd, pos, 10000.0f, RopeStyle::kNeox);
        std::vector<float> a_perm(a.size());
        perm(a, a_perm);
        EXPECT_EQ(a_perm, b) << "hd=" << hd << " pos=" << pos;
      });
    }
  }
}

TEST(Rope, KnownValuesAtPositionOne) {
  // hd = 8, theta = 10000: pair i rotates by 10000^(-2i/8) = 1, 0.1, 0.01, 0.001 rad.
  // Every pair starts at (1, 2) → (cos a - 2 sin a, sin a + 2 cos a).
  std::vector<float> x = {1, 2, 1, 2, 1, 2, 1, 2};
  rope(x.data(), 1, 8, 1, 10000.0f, RopeStyle::kInterleaved);
  EXPECT_NEAR(x[0], -1.1426396637f, 1e-6f);  // cos 1 - 2 sin 1
  EXPECT_NEAR(x[1], 1.9220755966f, 1e-6f);   // sin 1 + 2 cos 1
  const double angles[] = {1.0, 0.1, 0.01, 0.001};
  for (int i = 0; i < 4; ++i) {
    const double c = std::cos(angles[i]), s = std::sin(angles[i]);
    EXPECT_NEAR(x[static_cast<std::size_t>(2 * i)], c - 2 * s, 1e-6) << i;
    EXPECT_NEAR(x[static_cast<std::size_t>(2 * i + 1)], s + 2 * c, 1e-6) << i;
  }
  // NeoX: same rotation on pairs (i, i + 4).
  std::vector<float> y = {1, 1, 1, 1, 2, 2, 2, 2};
  rope(y.data(), 1, 8, 1, 10000.0f, RopeStyle::kNeox);
  EXPECT_NEAR(y[1], std::cos(0.1) - 2 * std::sin(0.1), 1e-6);
  EXPECT_NEAR(y[5], std::sin(0.1) + 2 * std::cos(0.1), 1e-6);
}

TEST(Rope, RotationsCompose) {
  // R(p) R(q) = R(p + q): relative-position property of RoPE.
  std::mt19937 rng(6);
  const auto x = random_vec(2 * 16, rng);
  auto a = x, b = x;
  rope(a.data(), 2, 16, 5, 10000.0f, RopeStyle::kNeox);
  rope(a.data(), 2, 16, 12, 10000.0f, RopeStyle::kNeox);
  rope(b.data(), 2, 16, 17, 10000.0f, RopeStyle::kNeox);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << i;
}

TEST(Rope, AllHeadsRotateAlike) {
  std::mt19937 rng(7);
  const auto head = random_vec(16, rng);
  std::vector<float> x;
  for (int h = 0; h < 5; ++h) x.insert(x.end(), head.begin(), head.end());
  rope(x.data(), 5, 16, 9, 500000.0f, RopeStyle::kInterleaved);
  for (int h = 1; h < 5; ++h) {
    EXPECT_TRUE(std::equal(x.begin(), x.begin() + 16, x.begin() + 16 * h)) << h;
  }
}

TEST(SwiGlu, MatchesFormula) {
  std::mt19937 rng(8);
  for (std::int64_t n : kLengths) {
    auto gate = random_vec(static_cast<std::size_t>(n), rng, 4.0f);
    if (n == 172) gate[0] = -100.0f, gate[1] = 100.0f, gate[2] = 0.0f;  // saturation, zero
    const auto up = random_vec(static_cast<std::size_t>(n), rng);
    auto out = gate;
    swiglu(out.data(), up.data(), n);
    for (std::size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      const double expected = g / (1.0 + std::exp(-g)) * up[i];
      EXPECT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << "n=" << n << " i=" << i;
      EXPECT_TRUE(std::isfinite(out[i]));
    }
  }
}

// ---- SIMD kernels vs their scalar reference twins, lengths around the vector widths ----

constexpr std::int64_t kOddLengths[] = {1, 3, 7, 15, 16, 17, 31, 63, 64, 65, 172, 2048, 5003};
constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // f32 rounding: relative error <= 2^-24

TEST(RmsNorm, MatchesReferenceOnOddLengths) {
  std::mt19937 rng(21);
  for (std::int64_t n : kOddLengths) {
    for (float scale : {1e-3f, 1.0f, 50.0f}) {
      const auto x = random_vec(static_cast<std::size_t>(n), rng, scale);
      const auto w = random_vec(static_cast<std::size_t>(n), rng);
      std::vector<float> ref(x.size());
      rmsnorm_reference(x.data(), w.data(), ref.data(), n, 1e-5f);
      // The f32 sum of squares over >= 4 partial sums (4 accumulators × >= 1 lane), then the
      // lanes and a scalar tail of < 16 terms, is off by <= (n/4 + 4 + 16)·u relative; the
      // square root halves that, and the f32 scale and two products add <= 3u.
      const double rel = (0.5 * (static_cast<double>(n) / 4.0 + 20.0) + 3.0) * kUnitRoundoff;
      test::for_each_simd_target([&] {
        std::vector<float> out(x.size());
        rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
        for (std::size_t i = 0; i < x.size(); ++i) {
          ASSERT_NEAR(out[i], ref[i], rel * std::fabs(ref[i])) << "n=" << n << " i=" << i;
        }
      });
    }
  }
}

TEST(Rope, MatchesReferenceInBothPairings) {
  std::mt19937 rng(22);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (std::int64_t hd : {2, 8, 10, 34, 48, 64, 96, 128}) {
      for (std::int32_t pos : {0, 1, 17, 4095, 100000}) {
        for (float theta : {10000.0f, 500000.0f}) {
          const std::int64_t n_heads = 3;
          const auto x = random_vec(static_cast<std::size_t>(n_heads * hd), rng, 3.0f);
          auto ref = x;
          rope_reference(ref.data(), n_heads, hd, pos, theta, style);
          // Same f32 cos/sin; each output a·c ∓ b·s is rounded <= 3 times (products, sum; or
          // one FMA and a product) at magnitudes <= |a| + |b|: both sides within 3u(|a| + |b|).
          test::for_each_simd_target([&] {
            auto out = x;
            rope(out.data(), n_heads, hd, pos, theta, style);
            for (std::int64_t h = 0; h < n_heads; ++h) {
              for (std::int64_t i = 0; i < hd / 2; ++i) {
                const std::int64_t a = h * hd + (style == RopeStyle::kInterleaved ? 2 * i : i);
                const std::int64_t b = h * hd + (style == RopeStyle::kInterleaved ? 2 * i + 1 : i + hd / 2);
                const double pair = std::fabs(x[static_cast<std::size_t>(a)]) + std::fabs(x[static_cast<std::size_t>(b)]);
                for (std::int64_t j : {a, b}) {
                  ASSERT_NEAR(out[static_cast<std::size_t>(j)], ref[static_cast<std::size_t>(j)], 6.0 * kUnitRoundoff * pair)
                      << "hd=" << hd << " pos=" << pos << " j=" << j;
                }
              }
            }
          });
        }
      }
    }
  }
}

TEST(Rope, TableOnceEqualsRopeCall) {
  // rope_table + rope_rotate (the model reuses one table for q and k) is exactly rope.
  std::mt19937 rng(23);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    const std::int64_t hd = 64;
    auto a = random_vec(4 * hd, rng), b = a;
    std::vector<float> c(hd), s(hd);
    rope_table(321, hd, 10000.0f, style, c.data(), s.data());
    rope_rotate(a.data(), 4, hd, c.data(), s.data(), style);
    rope(b.data(), 4, hd, 321, 10000.0f, style);
    EXPECT_EQ(a, b);
  }
}

TEST(Rope, FrequencyDivisorsScaleThePositions) {
  // Divisor 2 on every pair (linear scaling by 2) at position 2k is the plain table at k
  // (pos·freq / 2 is exact in f64); divisor 1 leaves the table unchanged; mixed divisors act per pair.
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    const std::int64_t hd = 16;
    std::vector<float> c(hd), s(hd), c2(hd), s2(hd);
    const std::vector<float> twos(hd / 2, 2.0f), ones(hd / 2, 1.0f);
    for (std::int32_t k : {0, 1, 7, 1000}) {
      rope_table(2 * k, hd, 10000.0f, style, c.data(), s.data(), twos.data());
      rope_table(k, hd, 10000.0f, style, c2.data(), s2.data());
      EXPECT_EQ(c, c2);
      EXPECT_EQ(s, s2);
      rope_table(k, hd, 10000.0f, style, c.data(), s.data(), ones.data());
      EXPECT_EQ(c, c2);
      EXPECT_EQ(s, s2);
    }
    std::vector<float> mixed(hd / 2, 1.0f);
    mixed[3] = 4.0f;
    rope_table(40, hd, 10000.0f, style, c.data(), s.data(), mixed.data());
    rope_table(10, hd, 10000.0f, style, c2.data(), s2.data());
    const std::int64_t j = style == RopeStyle::kInterleaved ? 6 : 3;  // first entry of pair 3
    EXPECT_EQ(c[j], c2[j]);
    EXPECT_EQ(s[j], s2[j]);
    rope_table(40, hd, 10000.0f, style, c2.data(), s2.data());
    const std::int64_t j0 = 0;  // pair 0 is not divided
    EXPECT_EQ(c[j0], c2[j0]);
  }
}

TEST(SwiGlu, MatchesReferenceOnOddLengths) {
  std::mt19937 rng(24);
  for (std::int64_t n : kOddLengths) {
    auto gate = random_vec(static_cast<std::size_t>(n), rng, 4.0f);
    const float extremes[] = {-100.0f, -88.5f, -20.0f, 0.0f, 1e-8f, 20.0f, 88.5f, 100.0f};
    for (std::size_t i = 0; i < gate.size() && i < std::size(extremes); ++i) gate[i * 3 % gate.size()] = extremes[i];
    const auto up = random_vec(static_cast<std::size_t>(n), rng);
    auto ref = gate;
    swiglu_reference(ref.data(), up.data(), n);
    // Highway's Exp is within 1 ulp; it enters silu damped by e/(1+e) <= 1, then 1 + e, the
    // division and the product round once each: <= 5u relative. Below g = -88 the kernel caps
    // e^-g at e^88 (result ~1e-36 instead of ~0): covered by the absolute 1e-30.
    test::for_each_simd_target([&] {
      auto out = gate;
      swiglu(out.data(), up.data(), n);
      for (std::size_t i = 0; i < gate.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], 5.0 * kUnitRoundoff * std::fabs(ref[i]) + 1e-30) << "n=" << n << " g=" << gate[i];
        ASSERT_TRUE(std::isfinite(out[i]));
      }
    });
  }
}

TEST(GeGlu, MatchesReferenceOnOddLengths) {
  std::mt19937 rng(25);
  for (std::int64_t n : kOddLengths) {
    auto gate = random_vec(static_cast<std::size_t>(n), rng, 4.0f);
    const float extremes[] = {-100.0f, -30.0f, -9.0f, -3.0f, 0.0f, 1e-8f, 3.0f, 30.0f, 100.0f};
    for (std::size_t i = 0; i < gate.size() && i < std::size(extremes); ++i) gate[i * 3 % gate.size()] = extremes[i];
    const auto up = random_vec(static_cast<std::size_t>(n), rng);
    auto ref = gate;
    geglu_reference(ref.data(), up.data(), n);
    // g·sigmoid(2u): u = sqrt(2/π)(g + 0.044715 g³) carries ~4u relative rounding, which e^-2u
    // turns into ~|2u|·4u relative error of e (damped by e/(1+e) <= 1 in the result); then Exp
    // (1 ulp), 1 + e, the division and the product. Far below 0 (e^-2u capped at e^88) the
    // result is ~1e-37 instead of ~0: the absolute 1e-30.
    test::for_each_simd_target([&] {
      auto out = gate;
      geglu(out.data(), up.data(), n);
      for (std::size_t i = 0; i < gate.size(); ++i) {
        const double g = gate[i], two_u = 1.5957691216057308 * (g + 0.044715 * g * g * g);
        const double tol = (8.0 + 4.0 * std::min(std::fabs(two_u), 88.0)) * kUnitRoundoff * std::fabs(ref[i]) + 1e-30;
        ASSERT_NEAR(out[i], ref[i], tol) << "n=" << n << " g=" << gate[i];
        ASSERT_TRUE(std::isfinite(out[i]));
      }
    });
  }
}

TEST(GeGlu, GatedActivationPicksTheKernel) {
  std::vector<float> gate = {-2.0f, -0.5f, 0.0f, 1.0f, 2.5f}, up = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  auto silu = gate, gelu = gate, a = gate, b = gate;
  swiglu(silu.data(), up.data(), 5);
  geglu(gelu.data(), up.data(), 5);
  gated_activation(FfnActivation::kSilu, a.data(), up.data(), 5);
  gated_activation(FfnActivation::kGeluTanh, b.data(), up.data(), 5);
  EXPECT_EQ(a, silu);
  EXPECT_EQ(b, gelu);
  EXPECT_NEAR(gelu[3], 0.8411920f * 4.0f, 1e-5f);  // gelu_tanh(1) = 0.841192
}

}  // namespace
}  // namespace peregrine

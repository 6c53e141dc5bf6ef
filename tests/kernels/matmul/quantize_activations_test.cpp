#include "peregrine/kernels/cpu/matmul/quantize_activations.h"
#include "peregrine/quant/fp16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

// Activation rows with block magnitudes spread over many octaves, some all-zero blocks, and
// some values exactly halfway between quantization steps (ties round to even).
std::vector<float> random_activations(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> octave(-20, 20), kind(0, 9);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * in));
  for (std::size_t b = 0; b < x.size(); b += 32) {
    const int k = kind(rng);
    const float scale = std::ldexp(1.0f, octave(rng));
    for (std::size_t i = b; i < b + 32; ++i) x[i] = k == 0 ? 0.0f : scale * normal(rng);
    if (k == 1) {  // amax 127 → d = 1: values k + 0.5 are exact ties
      x[b] = 127.0f;
      for (std::size_t i = b + 1; i < b + 32; ++i) x[i] = static_cast<float>(static_cast<int>(i - b) - 16) + 0.5f;
    }
  }
  return x;
}

// Q8_0's blocks of 32 and Q8_K's of 256.
struct Shape {
  std::int64_t block, in;
};
constexpr Shape kShapes[] = {{32, 32}, {32, 64}, {32, 96}, {32, 2048 + 32}, {256, 256}, {256, 2048 + 256}};

TEST(QuantizeActivations, SimdMatchesScalarTwinExactly) {
  std::mt19937 rng(7);
  for (const Shape s : kShapes) {
    const std::int64_t in = s.in;
    for (std::int64_t n_tokens : {1, 2, 5, 17, 40}) {
      const auto x = random_activations(n_tokens, in, rng);
      QuantizedActivations ref;
      quantize_activations_reference(x, n_tokens, in, ref, s.block);
      ASSERT_EQ(ref.block, s.block);
      ASSERT_EQ(ref.d.size(), static_cast<std::size_t>(n_tokens * in / s.block));
      test::for_each_simd_target([&] {
        for (int threads : {1, 3}) {
          for (std::int64_t min_parallel : {std::int64_t{0}, kMinParallelQuantize}) {
            ThreadPool pool(threads);
            QuantizedActivations got;
            quantize_activations(x, n_tokens, in, got, pool, min_parallel, s.block);
            ASSERT_EQ(got.n_tokens, n_tokens);
            ASSERT_EQ(got.in, in);
            ASSERT_EQ(got.block, s.block);
            EXPECT_EQ(got.q, ref.q) << " in=" << in << " n_tokens=" << n_tokens << " threads=" << threads;
            EXPECT_EQ(got.d, ref.d) << " in=" << in << " n_tokens=" << n_tokens << " threads=" << threads;
            EXPECT_EQ(got.s, ref.s) << " in=" << in << " n_tokens=" << n_tokens << " threads=" << threads;
          }
        }
      });
    }
  }
}

// ggml's scales: q = nearest(x · 127/amax); Q8_0's d = amax/127 rounded to f16 and Q8_1's sum
// s = f16(amax/127 · Σq) (f32 past f16's range) for blocks of 32, Q8_K's d = 1/(127/amax) for
// blocks of 256.
TEST(QuantizeActivations, ScalesAreGgmlsAndRoundTripErrorIsAboutHalfAStep) {
  std::mt19937 rng(8);
  const std::int64_t n_tokens = 9, in = 512;
  const auto x = random_activations(n_tokens, in, rng);
  ThreadPool pool(2);
  for (const std::int64_t block : {kActivationBlockQ8_0, kActivationBlockQ8_K}) {
    QuantizedActivations xq;
    quantize_activations(x, n_tokens, in, xq, pool, 0, block);
    ASSERT_EQ(xq.s.size(), block == kActivationBlockQ8_0 ? xq.d.size() : 0u);
    const auto values = static_cast<std::size_t>(block);
    for (std::size_t b = 0; b < xq.d.size(); ++b) {
      float amax = 0.0f;
      std::int32_t sum = 0;
      for (std::size_t i = b * values; i < (b + 1) * values; ++i) amax = std::max(amax, std::fabs(x[i]));
      for (std::size_t i = b * values; i < (b + 1) * values; ++i) sum += xq.q[i];
      if (block == kActivationBlockQ8_0) {
        ASSERT_EQ(xq.d[b], f16_to_f32(f32_to_f16(amax / 127.0f)));
        const float s = amax / 127.0f * static_cast<float>(sum);  // kept f32 past f16's range
        ASSERT_EQ(xq.s[b], std::fabs(s) < 65520.0f ? f16_to_f32(f32_to_f16(s)) : s);
      } else {
        ASSERT_EQ(xq.d[b], 1.0f / (127.0f / amax));
      }
      for (std::size_t i = b * values; i < (b + 1) * values; ++i) {
        ASSERT_LE(std::abs(xq.q[i]), 127);
        // Half a step of the exact scale amax/127, plus |q| <= 127 times the f16 rounding of d
        // (2^-11 relative, or all of d where amax/127 is below f16's range), plus the f32
        // rounding of 127/amax and of the products (a few ulps of |x/d| <= 127, times d).
        const float exact = amax / 127.0f;
        const float bound = exact * (0.5f + 1e-4f) + 127.0f * std::fabs(exact - xq.d[b]);
        ASSERT_LE(std::fabs(x[i] - xq.d[b] * xq.q[i]), bound) << "block " << block << " value " << i;
      }
    }
  }
}

// Q8_1's block sum of a block with amax = 4000 is ~ 1e5, past f16's range: kept in f32.
TEST(QuantizeActivations, BlockSumsPastHalfRangeStayFinite) {
  std::vector<float> x(32, 3000.0f);
  x[0] = 4000.0f;
  ThreadPool pool(1);
  QuantizedActivations xq;
  quantize_activations(x, 1, 32, xq, pool);
  ASSERT_EQ(xq.s.size(), 1u);
  EXPECT_TRUE(std::isfinite(xq.s[0]));
  EXPECT_NEAR(xq.s[0], 3000.0f * 31 + 4000.0f, 0.01f * 97000.0f);
}

TEST(QuantizeActivations, TiesRoundToEvenAndZeroBlocksGiveZeroScale) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  ThreadPool pool(1);
  QuantizedActivations xq;
  quantize_activations(x, 1, 64, xq, pool);
  EXPECT_EQ(xq.d, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(xq.q[0], 127);
  EXPECT_EQ(xq.q[1], 2);
  EXPECT_EQ(xq.q[2], -4);
  EXPECT_EQ(xq.q[3], 0);
  EXPECT_TRUE(std::all_of(xq.q.begin() + 32, xq.q.end(), [](std::int8_t v) { return v == 0; }));
}

}  // namespace
}  // namespace peregrine

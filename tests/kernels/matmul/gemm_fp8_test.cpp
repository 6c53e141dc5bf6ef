// matmul on FP8 weights (gemm_fp8) against its scalar twin matmul_reference, and the SIMD
// decoding of every one of the 256 codes of both formats.
#include "peregrine/kernels/cpu/matmul/gemm_fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp8.h"

namespace peregrine {
namespace {

constexpr DType kFormats[] = {DType::kF8E4M3, DType::kF8E5M2};

// As for gemm_int (gemm_int_test.cpp): the kernels sum either the reference's weights
// W_i = fl(s·fp8(f_i)) times x, or fp8(f_i)·x scaled by s once at the end of the row; each term
// passes through at most in + 1 roundings, and Σ|s·fp8(f_i)·x_i| <= (1 + u)·Σ|W_i·x_i|, so
// |y − ref| <= γ_{in+1}·(1 + u)·Σ|W_i·x_i| + u·|ref| <= γ_{in+2}·Σ|W_i·x_i| + u·|ref|.
TEST(GemmFp8, MatchesReferenceForEveryRowLengthAndTokenCount) {
  std::mt19937 rng(81);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (DType t : kFormats) {
    for (std::int64_t in : {1, 7, 33, 100, 172, 256, 300}) {
      const std::int64_t out = 13;
      const auto w = test::random_fp8_weights(t, out, in, rng);
      std::vector<float> wf(static_cast<std::size_t>(out * in));
      for (std::int64_t o = 0; o < out; ++o) {
        dequantize_row(w.view, o, std::span<float>(wf).subspan(static_cast<std::size_t>(o * in), static_cast<std::size_t>(in)));
      }
      for (std::int64_t n_tokens : {1, 2, 3, 4, 5, 40}) {
        std::vector<float> x(static_cast<std::size_t>(n_tokens * in));
        for (auto& v : x) v = normal(rng);
        std::vector<float> ref(static_cast<std::size_t>(n_tokens * out));
        matmul_reference(w.view, x, n_tokens, ref);
        test::for_each_simd_target([&] {
          for (int threads : {1, 2}) {
            ThreadPool pool(threads);
            std::vector<float> y(ref.size(), NAN);
            matmul(w.view, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
            for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
              for (std::int64_t o = 0; o < out; ++o) {
                double m = 0.0;
                for (std::int64_t i = 0; i < in; ++i) {
                  m += std::fabs(static_cast<double>(wf[static_cast<std::size_t>(o * in + i)]) * x[static_cast<std::size_t>(tok * in + i)]);
                }
                const auto k = static_cast<std::size_t>(tok * out + o);
                ASSERT_NEAR(y[k], ref[k], test::f32_gamma(static_cast<double>(in + 2)) * m + std::ldexp(std::fabs(ref[k]), -24))
                    << dtype_name(t) << " in=" << in << " n_tokens=" << n_tokens << " threads=" << threads
                    << " token " << tok << " row " << o;
              }
            }
          }
        });
      }
    }
  }
}

float decode(DType t, std::uint8_t c) { return t == DType::kF8E4M3 ? fp8_e4m3_to_f32(c) : fp8_e5m2_to_f32(c); }

// One row holding every finite code once, multiplied by one-hot activations: y = that weight
// exactly (the other products are exact zeros), through the fused GEMV (1 token), units decoded
// in registers for 3 tokens, the buffered path (5) and the GEMM (all codes as tokens), with
// scales that make subnormal codes matter.
TEST(GemmFp8, EveryFiniteCodeDecodesExactly) {
  for (DType t : kFormats) {
    std::vector<std::uint8_t> codes;
    for (int c = 0; c < 256; ++c) {
      if (std::isfinite(decode(t, static_cast<std::uint8_t>(c)))) codes.push_back(static_cast<std::uint8_t>(c));
    }
    const auto in = static_cast<std::int64_t>(codes.size());
    for (float scale : {1.0f, -0.375f, 3.0e-3f}) {
      test::GuardedBytes bytes(kRowScaleBytes + codes.size());
      std::memcpy(bytes.data(), &scale, sizeof scale);
      std::memcpy(bytes.data() + kRowScaleBytes, codes.data(), codes.size());
      const TensorView w{"w", t, {1, in}, bytes.data(), bytes.size()};
      for (std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{3}, std::int64_t{5}, in}) {
        test::for_each_simd_target([&] {
          ThreadPool pool(1);
          for (std::int64_t first = 0; first < in; first += n_tokens) {
            const std::int64_t n = std::min(n_tokens, in - first);
            std::vector<float> x(static_cast<std::size_t>(n * in), 0.0f), y(static_cast<std::size_t>(n), NAN);
            for (std::int64_t k = 0; k < n; ++k) x[static_cast<std::size_t>(k * in + first + k)] = 1.0f;
            matmul(w, x, n, y, pool);
            for (std::int64_t k = 0; k < n; ++k) {
              const std::uint8_t c = codes[static_cast<std::size_t>(first + k)];
              ASSERT_EQ(y[static_cast<std::size_t>(k)], scale * decode(t, c))
                  << dtype_name(t) << " code 0x" << std::hex << int{c} << " scale " << scale << " n_tokens " << std::dec << n;
            }
          }
        });
      }
    }
  }
}

TEST(GemmFp8, NaNAndInfinityCodesPropagate) {
  // E4M3 0x7f / 0xff are NaN; E5M2 0x7c is +inf, 0xfc −inf, 0x7d..0x7f NaN.
  const struct {
    DType t;
    std::uint8_t code;
  } cases[] = {{DType::kF8E4M3, 0x7f}, {DType::kF8E4M3, 0xff}, {DType::kF8E5M2, 0x7c},
               {DType::kF8E5M2, 0xfc}, {DType::kF8E5M2, 0x7e}};
  for (const auto& c : cases) {
    const std::int64_t in = 40;
    test::GuardedBytes bytes(kRowScaleBytes + in);
    const float scale = 0.5f;
    std::memcpy(bytes.data(), &scale, sizeof scale);
    std::memset(bytes.data() + kRowScaleBytes, 0x38, in);  // 1.0 in E4M3 (0x38), 0.5 in E5M2
    bytes.data()[kRowScaleBytes + 17] = c.code;
    const TensorView w{"w", c.t, {1, in}, bytes.data(), bytes.size()};
    std::vector<float> x(static_cast<std::size_t>(in), 1.0f), y(1), ref(1);
    matmul_reference(w, x, 1, ref);
    test::for_each_simd_target([&] {
      ThreadPool pool(1);
      matmul(w, x, 1, y, pool);
      if (std::isnan(ref[0])) {
        EXPECT_TRUE(std::isnan(y[0])) << dtype_name(c.t) << " code " << int{c.code};
      } else {
        EXPECT_EQ(y[0], ref[0]) << dtype_name(c.t) << " code " << int{c.code};
        EXPECT_TRUE(std::isinf(y[0]));
      }
    });
  }
}

}  // namespace
}  // namespace peregrine

// matmul on group-wise integer weights with int8 activations (kInt, act_bits 8:
// gemm_int8_act) against its scalar twin, and against the f32-activation product.
#include "peregrine/kernels/cpu/matmul/gemm_int8_act.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/kernels/cpu/matmul/token_quantize.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

constexpr std::int64_t kRowLengths[] = {1, 7, 33, 100, 172, 256, 300};
constexpr std::int64_t kTokenCounts[] = {1, 2, 5, 40};
constexpr std::int64_t kRows = 13;  // three 4-row tiles and one partial

// Normal activations; with `outliers`, three columns carry a value of ±20 in one token each
// (LLM.int8()'s systematic outlier features) and the threshold is 6.
std::vector<float> random_activations(std::int64_t n_tokens, std::int64_t in, bool outliers, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * in));
  for (auto& v : x) v = normal(rng);
  if (outliers) {
    std::uniform_int_distribution<std::int64_t> column(0, in - 1), token(0, n_tokens - 1);
    for (int k = 0; k < 3; ++k) x[static_cast<std::size_t>(token(rng) * in + column(rng))] = k % 2 ? -20.0f : 20.0f;
  }
  return x;
}

std::vector<float> dequantized(const TensorView& w) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> wf(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o) {
    dequantize_row(w, o, std::span<float>(wf).subspan(static_cast<std::size_t>(o * in), static_cast<std::size_t>(in)));
  }
  return wf;
}

// matmul (every SIMD target, 1 and 2 threads) against matmul_reference. Both compute
// s_x·Σ_g scale_g·D_g + Σ_{c outlier} W_c·x_c with the same exact integer brackets D_g (same
// activation quantization: quantize_tokens is identical to its twin). The kernel's f32 terms:
// per group and int32 lane (at most 16 lanes) one conversion and one product with scale_g, the
// outlier products; each term then passes through at most (16·G + n_outliers − 1) additions
// and the product with s_x: k = 16·G + n_outliers + 3 roundings, so
//   |y − ref| <= γ_k · (s_x·Σ_i |W_i·xq_i| + Σ_c |W_c·x_c|) + u·|ref|
// (|lane sum| <= Σ over its values of |(q − zero)·xq|; the reference rounds once from f64).
void expect_matches_reference(const TensorView& w, bool outliers, std::mt19937& rng, const std::string& label) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto wf = dequantized(w);
  const double groups = std::ceil(static_cast<double>(in) / static_cast<double>(w.quant.group_size));
  for (std::int64_t n_tokens : kTokenCounts) {
    const auto x = random_activations(n_tokens, in, outliers, rng);
    TokenQuantizedActivations xq;
    quantize_tokens_reference(x, n_tokens, in, w.quant.outlier_threshold, xq);
    std::vector<float> ref(static_cast<std::size_t>(n_tokens * out));
    matmul_reference(w, x, n_tokens, ref);
    const double k = 16.0 * groups + static_cast<double>(xq.outliers.size()) + 3.0;
    std::vector<double> bound(ref.size());
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      for (std::int64_t o = 0; o < out; ++o) {
        double m = 0.0;
        for (std::int64_t i = 0; i < in; ++i) {
          const double wi = wf[static_cast<std::size_t>(o * in + i)];
          m += std::fabs(wi * xq.q[static_cast<std::size_t>(t * in + i)]) * xq.scale[static_cast<std::size_t>(t)];
        }
        for (std::int64_t c : xq.outliers) m += std::fabs(wf[static_cast<std::size_t>(o * in + c)] * x[static_cast<std::size_t>(t * in + c)]);
        const auto e = static_cast<std::size_t>(t * out + o);
        bound[e] = test::f32_gamma(k) * m + std::ldexp(std::fabs(ref[e]), -24);
      }
    }
    test::for_each_simd_target([&] {
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> y(ref.size(), NAN);
        matmul(w, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
        for (std::size_t e = 0; e < y.size(); ++e) {
          ASSERT_NEAR(y[e], ref[e], bound[e]) << label << " in=" << in << " n_tokens=" << n_tokens
                                              << " outliers=" << xq.outliers.size() << " threads=" << threads
                                              << " token " << e / static_cast<std::size_t>(out)
                                              << " row " << e % static_cast<std::size_t>(out);
        }
      }
    });
  }
}

std::string describe(const QuantParams& p) {
  std::ostringstream s;
  s << "W" << p.bits << "A8 " << (p.asymmetric ? "asym" : "sym") << " group " << p.group_size << " threshold "
    << p.outlier_threshold;
  return s.str();
}

TEST(GemmInt8Act, MatchesReferenceForEveryBitWidthGroupAndRowLength) {
  std::mt19937 rng(71);
  for (int bits : {2, 3, 4, 8}) {
    for (bool asymmetric : {false, true}) {
      for (std::int64_t group : {32, 64, 128, 0}) {  // 0: per-channel
        for (std::int64_t in : kRowLengths) {
          const QuantParams p{bits, group == 0 ? in : group, asymmetric, 8};
          const auto w = test::random_int_weights(kRows, in, p, rng);
          expect_matches_reference(w.view, /*outliers=*/false, rng, describe(p));
        }
      }
    }
  }
}

TEST(GemmInt8Act, LlmInt8OutlierColumnsMatchReference) {
  std::mt19937 rng(72);
  for (int bits : {4, 8}) {
    for (std::int64_t group : {32, 0}) {
      for (std::int64_t in : {7, 172, 300}) {
        const QuantParams p{bits, group == 0 ? in : group, false, 8, /*outlier_threshold=*/6.0f};
        const auto w = test::random_int_weights(kRows, in, p, rng);
        expect_matches_reference(w.view, /*outliers=*/true, rng, describe(p));
      }
    }
  }
}

TEST(GemmInt8Act, GroupsThatCrossSimdVectors) {
  std::mt19937 rng(73);
  for (std::int64_t group : {1, 5, 24, 48, 100}) {
    for (std::int64_t in : {7, 172, 300}) {
      const QuantParams p{3, group, true, 8, 6.0f};
      const auto w = test::random_int_weights(kRows, in, p, rng);
      expect_matches_reference(w.view, /*outliers=*/true, rng, describe(p));
    }
  }
}

// Against the f32-activation product of the same weights (act_bits 16's matmul_reference): the
// difference is the activation rounding, |x_i − s_x·xq_i| <= (s_x/2)·(1 + 1e-4) on the int8
// columns (f32 rounding of 1/s_x and of x·(1/s_x)), none on the outlier columns, plus the f32
// sums: |y8 − y16| <= (s_x/2)(1 + 1e-4)·Σ_{int8 i}|W_i| + γ_k·M + u·|y16| with M and k as above.
TEST(GemmInt8Act, WithinActivationRoundingOfTheFloatProduct) {
  std::mt19937 rng(74);
  for (const QuantParams& p8 : {QuantParams{8, 256, false, 8}, QuantParams{4, 32, true, 8},
                                QuantParams{8, 256, false, 8, 6.0f}}) {
    const std::int64_t in = 256, n_tokens = 5;
    const auto w = test::random_int_weights(kRows, in, p8, rng);
    TensorView w16 = w.view;
    w16.quant.act_bits = 16;
    w16.quant.outlier_threshold = 0.0f;
    const auto wf = dequantized(w16);
    const auto x = random_activations(n_tokens, in, p8.outlier_threshold > 0.0f, rng);
    TokenQuantizedActivations xq;
    quantize_tokens_reference(x, n_tokens, in, p8.outlier_threshold, xq);
    std::vector<float> y16(static_cast<std::size_t>(n_tokens * kRows)), y8(y16.size());
    matmul_reference(w16, x, n_tokens, y16);
    ThreadPool pool(2);
    matmul(w.view, x, n_tokens, y8, pool);
    const double k = 16.0 * std::ceil(static_cast<double>(in) / static_cast<double>(p8.group_size)) +
                     static_cast<double>(xq.outliers.size()) + 3.0;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const double sx = xq.scale[static_cast<std::size_t>(t)];
      for (std::int64_t o = 0; o < kRows; ++o) {
        double rounding = 0.0, m = 0.0;
        for (std::int64_t i = 0; i < in; ++i) {
          const double wi = std::fabs(wf[static_cast<std::size_t>(o * in + i)]);
          const bool outlier = std::binary_search(xq.outliers.begin(), xq.outliers.end(), i);
          rounding += outlier ? 0.0 : 0.5 * sx * (1.0 + 1e-4) * wi;
          m += wi * (outlier ? std::fabs(x[static_cast<std::size_t>(t * in + i)]) : sx * std::abs(xq.q[static_cast<std::size_t>(t * in + i)]));
        }
        const auto e = static_cast<std::size_t>(t * kRows + o);
        ASSERT_NEAR(y8[e], y16[e], rounding + test::f32_gamma(k) * m + std::ldexp(std::fabs(y16[e]), -24))
            << describe(p8) << " token " << t << " row " << o;
      }
    }
  }
}

}  // namespace
}  // namespace peregrine

#include "peregrine/kernels/cpu/matmul/gemm_bf16_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/fp16.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

// For every (t, o) of rows [row_begin, row_end): the exact sum of W[o, i] · bf16(x[t, i]) in f64
// and the sum of the terms' magnitudes.
struct Exact {
  std::vector<double> value, magnitude;
};

Exact exact(const TensorView& w, const std::vector<float>& x, std::int64_t n_tokens) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto* bits = static_cast<const std::uint16_t*>(w.data);
  Exact e{std::vector<double>(static_cast<std::size_t>(n_tokens * out)), std::vector<double>(static_cast<std::size_t>(n_tokens * out))};
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t i = 0; i < in; ++i) {
        const double term = static_cast<double>(bf16_to_f32(bits[o * in + i])) *
                            bf16_to_f32(f32_to_bf16(x[static_cast<std::size_t>(t * in + i)]));
        e.value[static_cast<std::size_t>(t * out + o)] += term;
        e.magnitude[static_cast<std::size_t>(t * out + o)] += std::fabs(term);
      }
    }
  }
  return e;
}

// gemm_bf16_dot on rows [row_begin, row_end) against its scalar twin and the exact sum: each
// output of either is within γ_(in + 1) · Σ|terms| of the exact value (every product of two
// BF16 values is exact in f32; each term passes through at most in + 1 rounded additions), so
// they are within twice that of each other. Columns outside the rows stay untouched.
void check_rows(const TensorView& w, std::int64_t n_tokens, std::int64_t row_begin, std::int64_t row_end,
                std::mt19937& rng) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto x = test::random_activations(n_tokens, in, rng);
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(static_cast<std::size_t>(n_tokens * out), sentinel), twin = y;
  gemm_bf16_dot(w, x, n_tokens, y, row_begin, row_end);
  gemm_bf16_dot_reference(w, x, n_tokens, twin, row_begin, row_end);
  const Exact ex = exact(w, x, n_tokens);
  const double gamma = test::f32_gamma(static_cast<double>(in + 1));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      const auto e = static_cast<std::size_t>(t * out + o);
      SCOPED_TRACE(std::to_string(out) + "x" + std::to_string(in) + " n_tokens=" + std::to_string(n_tokens) + " rows [" +
                   std::to_string(row_begin) + ", " + std::to_string(row_end) + ") token " + std::to_string(t) + " row " +
                   std::to_string(o));
      if (o < row_begin || o >= row_end) {
        ASSERT_TRUE(std::isnan(y[e])) << "wrote outside its rows";
        continue;
      }
      ASSERT_LE(std::fabs(y[e] - ex.value[e]), gamma * ex.magnitude[e]) << y[e] << " vs exact " << ex.value[e];
      ASSERT_LE(std::fabs(twin[e] - ex.value[e]), gamma * ex.magnitude[e]) << twin[e] << " (twin) vs exact " << ex.value[e];
    }
  }
}

TEST(GemmBf16Dot, EqualsItsScalarTwinAndTheExactSumOnOddShapesAndRowRanges) {
  if (!gemm_bf16_dot_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(17);
  // in = 514: 257 input pairs cross the 256-pair block; out = 61 leaves a 1-row micro-tile.
  for (std::int64_t in : {2, 18, 172, 514}) {
    for (std::int64_t out : {1, 13, 61}) {
      const auto w = test::random_half_weights(DType::kBF16, out, in, rng);
      for (std::int64_t n_tokens : {1, 16, 17, 32, 33, 70}) {
        check_rows(w.view, n_tokens, 0, out, rng);
        if (out > 2) check_rows(w.view, n_tokens, 1, out - 1, rng);
      }
    }
  }
}

TEST(GemmBf16Dot, TakesEvenRowedBf16MatricesOnly) {
  std::mt19937 rng(3);
  const auto bf16 = test::random_half_weights(DType::kBF16, 4, 8, rng);
  EXPECT_TRUE(gemm_bf16_dot_takes(bf16.view));
  const auto f16 = test::random_half_weights(DType::kF16, 4, 8, rng);
  EXPECT_FALSE(gemm_bf16_dot_takes(f16.view));
  const auto odd = test::random_half_weights(DType::kBF16, 4, 7, rng);
  EXPECT_FALSE(gemm_bf16_dot_takes(odd.view));
  TensorView misaligned = bf16.view;
  misaligned.data = static_cast<const std::uint8_t*>(bf16.view.data) - 2;  // 2-byte aligned, not 4
  EXPECT_FALSE(gemm_bf16_dot_takes(misaligned));
}

// matmul() takes the BF16 dot path from kGemmMinTokens tokens on where the CPU has it (its
// result is then the twin's within the bound), the f32 GEMM elsewhere.
TEST(GemmBf16Dot, MatmulUsesItForBf16Prefill) {
  if (!gemm_bf16_dot_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(5);
  const std::int64_t out = 40, in = 96, n_tokens = 48;
  const auto w = test::random_half_weights(DType::kBF16, out, in, rng);
  const auto x = test::random_activations(n_tokens, in, rng);
  std::vector<float> y(static_cast<std::size_t>(n_tokens * out)), twin = y;
  ThreadPool pool(2);
  matmul(w.view, x, n_tokens, y, pool, 0);
  gemm_bf16_dot_reference(w.view, x, n_tokens, twin, 0, out);
  const Exact ex = exact(w.view, x, n_tokens);
  for (std::size_t e = 0; e < y.size(); ++e) {
    ASSERT_LE(std::fabs(y[e] - twin[e]), 2.0 * test::f32_gamma(static_cast<double>(in + 1)) * ex.magnitude[e]) << e;
  }
}

}  // namespace
}  // namespace peregrine

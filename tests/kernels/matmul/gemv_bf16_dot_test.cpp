// The BF16 pair-dot GEMV over half_packed's layout (kernels/cpu/matmul/gemv_bf16_dot.h): against its
// scalar twin and the exact sums of the BF16-rounded products on every remainder of the pairs
// mod 4 and every token-chunk size, on 1 and 3 threads; matmul / matmul_fused route packed BF16
// through it in the default Bf16Activations::kBf16 mode and through gemv_half_packed in kF32.
#include "peregrine/kernels/cpu/matmul/gemv_bf16_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/kernels/cpu/matmul/half_packed.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/fp16.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

struct Shape {
  std::int64_t out, in;
};
// in / 2 pairs with every remainder mod 4 (the 4 partial sums) and tinyllama's rows; 16 and 13
// groups for the single-token kernel's kDecodeStreams side-by-side parts (whole, and with groups
// left over).
constexpr Shape kShapes[] = {{16, 2}, {32, 18}, {16, 260}, {16, 1030}, {48, 2048}, {32, 5632}, {256, 34}, {208, 10}};
// Token counts: every chunk size 1-6 of the multi-token tile (6 whole, 8 = 4 + 4, 13 = 5 + 4 + 4).
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15};

struct Packed {
  test::StoredWeights weights;
  std::vector<std::uint8_t> bytes;
};
Packed packed_bf16(Shape s, std::mt19937& rng) {
  Packed p{test::random_half_weights(DType::kBF16, s.out, s.in, rng), {}};
  p.bytes.resize(p.weights.view.nbytes);
  EXPECT_TRUE(pack_half(p.weights.view, p.bytes));
  p.weights.view.packed = p.bytes.data();
  return p;
}

// Σ_i W[o, i]·bf16(x[t, i]) and Σ|terms| in f64 for (t, o), over the row-major stored weights.
std::pair<double, double> exact(const TensorView& w, const std::vector<float>& x, std::int64_t t, std::int64_t o) {
  const std::int64_t in = w.row_length();
  const auto* bits = static_cast<const std::uint16_t*>(w.data);
  double sum = 0.0, magnitude = 0.0;
  for (std::int64_t i = 0; i < in; ++i) {
    const double term = static_cast<double>(bf16_to_f32(bits[o * in + i])) *
                        bf16_to_f32(f32_to_bf16(x[static_cast<std::size_t>(t * in + i)]));
    sum += term;
    magnitude += std::fabs(term);
  }
  return {sum, magnitude};
}

// Each term passes through at most ⌈in/8⌉ + 3 roundings (its pair's two additions to its
// partial sum, the partial sum's later ones, two more to join the sums): both results lie
// within γ_(in+3)·Σ|terms| of the exact value.
TEST(GemvBf16Dot, EqualsTheExactSumWithinItsBoundAsTheTwinDoes) {
  std::mt19937 rng(41);
  const Packed probe = packed_bf16({16, 2}, rng);
  if (!gemv_bf16_dot_takes(probe.weights.view)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  for (Shape s : kShapes) {
    const Packed p = packed_bf16(s, rng);
    const double gamma = test::f32_gamma(static_cast<double>(s.in + 3));
    for (std::int64_t n_tokens : kTokenCounts) {
      const auto x = test::random_activations(n_tokens, s.in, rng);
      std::vector<float> twin(static_cast<std::size_t>(n_tokens * s.out));
      gemv_bf16_dot_reference(p.weights.view, x, n_tokens, twin);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(twin.size(), NAN);
        const MatmulProduct product{&p.weights.view, x, y};
        gemv_bf16_dot({&product, 1}, n_tokens, pool, /*min_parallel_macs=*/0);
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          for (std::int64_t o = 0; o < s.out; ++o) {
            const auto [sum, magnitude] = exact(p.weights.view, x, t, o);
            const auto k = static_cast<std::size_t>(t * s.out + o);
            ASSERT_LE(std::fabs(y[k] - sum), gamma * magnitude)
                << s.out << "x" << s.in << " n_tokens=" << n_tokens << " threads=" << threads << " token " << t << " row " << o;
            ASSERT_LE(std::fabs(twin[k] - sum), gamma * magnitude) << "twin, row " << o;
          }
        }
      }
    }
  }
}

TEST(GemvBf16Dot, TakesPackedEvenRowedBf16Only) {
  std::mt19937 rng(42);
  Packed p = packed_bf16({16, 64}, rng);
  if (!gemv_bf16_dot_takes(p.weights.view)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  TensorView unpacked = p.weights.view;
  unpacked.packed = nullptr;
  EXPECT_FALSE(gemv_bf16_dot_takes(unpacked));
  TensorView f16 = p.weights.view;
  f16.dtype = DType::kF16;
  EXPECT_FALSE(gemv_bf16_dot_takes(f16));
  Packed odd{test::random_half_weights(DType::kBF16, 16, 63, rng), {}};
  odd.bytes.resize(odd.weights.view.nbytes);
  ASSERT_TRUE(pack_half(odd.weights.view, odd.bytes));
  odd.weights.view.packed = odd.bytes.data();
  EXPECT_FALSE(gemv_bf16_dot_takes(odd.weights.view));
}

// Q/K/V-like products of one input through matmul_fused and one through matmul: the pair-dot
// GEMV's bits in the kBf16 mode, gemv_half_packed's on the unrounded x in kF32.
TEST(GemvBf16Dot, MatmulTakesItInTheBf16ModeOnly) {
  std::mt19937 rng(43);
  std::vector<Packed> weights;
  for (Shape s : {Shape{256, 512}, Shape{64, 512}, Shape{64, 512}}) weights.push_back(packed_bf16(s, rng));
  if (!gemv_bf16_dot_takes(weights[0].weights.view)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  ThreadPool pool(2);
  const std::int64_t n_tokens = 6;
  const auto x = test::random_activations(n_tokens, 512, rng);
  for (Bf16Activations mode : {Bf16Activations::kBf16, Bf16Activations::kF32}) {
    const ScopedBf16Activations scoped(mode);
    std::vector<std::vector<float>> fused, expected;
    std::vector<MatmulProduct> products, expected_products;
    for (const Packed& p : weights) {
      fused.emplace_back(static_cast<std::size_t>(n_tokens * p.weights.view.n_rows()), NAN);
      expected.emplace_back(fused.back().size(), NAN);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      products.push_back({&weights[i].weights.view, x, fused[i]});
      expected_products.push_back({&weights[i].weights.view, x, expected[i]});
    }
    matmul_fused(products, n_tokens, pool, 0);
    if (mode == Bf16Activations::kBf16) {
      gemv_bf16_dot(expected_products, n_tokens, pool, 0);
    } else {
      gemv_half_packed(expected_products, n_tokens, pool, 0);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(fused[i], expected[i]) << "product " << i;
    std::vector<float> alone(fused[0].size(), NAN);
    matmul(weights[0].weights.view, x, n_tokens, alone, pool, 0);
    EXPECT_EQ(alone, expected[0]);
  }
}

}  // namespace
}  // namespace peregrine

// F16 / BF16 weights repacked 16 rows in lanes (kernels/cpu/matmul/half_packed.h): the SIMD GEMV gives
// the scalar twin's bits on every target and thread count, the twin over the packed layout is
// float_matmul_reference on the original rows up to summation order (so the packing puts every
// value where the layout says), and matmul / matmul_fused take the packed path with the same
// results.
#include "peregrine/kernels/cpu/matmul/half_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

struct Shape {
  std::int64_t out, in;
};
// Row lengths with every remainder mod 4 (the kernel's 4 partial sums) and tinyllama's; 16 and
// 13 groups for the single-token kernel's kDecodeStreams side-by-side parts (whole, and with
// groups left over).
constexpr Shape kShapes[] = {{16, 1}, {16, 7}, {32, 17}, {48, 2048}, {16, 258}, {32, 5632}, {16, 1027}, {256, 33}, {208, 9}};
constexpr DType kHalfTypes[] = {DType::kF16, DType::kBF16};
// Token counts: every chunk size 1-6 of the multi-token tile (6 whole, 8 = 4 + 4, 13 = 5 + 4 + 4).
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, kHalfPackedTokens};

// `w` packed into a buffer of its own, w.packed pointing there.
struct Packed {
  test::StoredWeights weights;
  std::vector<std::uint8_t> bytes;
};
Packed packed_copy(DType t, Shape s, std::mt19937& rng) {
  Packed p{test::random_half_weights(t, s.out, s.in, rng), {}};
  p.bytes.resize(p.weights.view.nbytes);
  const Status st = pack_half(p.weights.view, p.bytes);
  EXPECT_TRUE(st) << st.message();
  p.weights.view.packed = p.bytes.data();
  return p;
}

TEST(HalfPacked, GemvEqualsTheTwinBitForBit) {
  std::mt19937 rng(31);
  for (DType t : kHalfTypes) {
    for (Shape s : kShapes) {
      const Packed p = packed_copy(t, s, rng);
      for (std::int64_t n_tokens : kTokenCounts) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out));
        gemv_half_packed_reference(p.weights.view, x, n_tokens, ref);
        test::for_each_simd_target([&] {
          for (int threads : {1, 3}) {
            ThreadPool pool(threads);
            std::vector<float> y(ref.size(), NAN);
            const MatmulProduct product{&p.weights.view, x, y};
            gemv_half_packed({&product, 1}, n_tokens, pool, /*min_parallel_macs=*/0);
            EXPECT_EQ(y, ref) << dtype_name(t) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens
                              << " threads=" << threads;
          }
        });
      }
    }
  }
}

// The twin sums the exact products W·x in 4 partial sums of ⌈in/4⌉ fused multiply-adds, then
// two additions: every term passes through at most ⌈in/4⌉ + 2 roundings, as many as
// float_matmul_reference's `in` (its one running sum): |twin − ref| <= 2·γ_in·Σ|W·x|.
TEST(HalfPacked, TwinOverThePackedLayoutIsTheRowMajorProduct) {
  std::mt19937 rng(32);
  for (DType t : kHalfTypes) {
    for (Shape s : kShapes) {
      const Packed p = packed_copy(t, s, rng);
      std::vector<float> w(static_cast<std::size_t>(s.out * s.in));
      dequantize(t, p.weights.view.data, w);
      const double bound = 2.0 * test::f32_gamma(static_cast<double>(s.in + 2));
      for (std::int64_t n_tokens : {1, 5}) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        std::vector<float> got(static_cast<std::size_t>(n_tokens * s.out)), expected(got.size());
        gemv_half_packed_reference(p.weights.view, x, n_tokens, got);
        float_matmul_reference(p.weights.view, x, n_tokens, expected, 0, s.out);
        for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
          for (std::int64_t o = 0; o < s.out; ++o) {
            double magnitude = 0.0;
            for (std::int64_t i = 0; i < s.in; ++i) {
              magnitude += std::fabs(static_cast<double>(w[static_cast<std::size_t>(o * s.in + i)]) * x[static_cast<std::size_t>(tok * s.in + i)]);
            }
            const auto k = static_cast<std::size_t>(tok * s.out + o);
            ASSERT_NEAR(got[k], expected[k], bound * magnitude) << dtype_name(t) << " " << s.out << "x" << s.in << " row " << o;
          }
        }
      }
    }
  }
}

// A forward with no logits rows (a prompt chunk) multiplies the LM head by 0 tokens: nothing to
// do, on every path (the packed GEMVs hand such a call to the row-major kernels).
TEST(HalfPacked, ZeroTokensIsANoOp) {
  std::mt19937 rng(35);
  ThreadPool pool(2);
  for (DType t : kHalfTypes) {
    const Packed p = packed_copy(t, {32, 64}, rng);
    std::vector<float> x, y;
    matmul(p.weights.view, x, 0, y, pool, 0);
    const MatmulProduct product{&p.weights.view, x, y};
    matmul_fused({&product, 1}, 0, pool, 0);
    EXPECT_TRUE(y.empty()) << dtype_name(t);
  }
}

TEST(HalfPacked, RefusesWhatItCannotPack) {
  std::mt19937 rng(33);
  const test::StoredWeights rows = test::random_half_weights(DType::kF16, 24, 64, rng);  // not whole groups
  test::StoredWeights f32_like = test::random_half_weights(DType::kF16, 16, 32, rng);
  f32_like.view.dtype = DType::kF32;
  f32_like.view.shape = {16, 16};
  for (const TensorView* w : {&rows.view, static_cast<const TensorView*>(&f32_like.view)}) {
    EXPECT_FALSE(half_packable(*w));
    std::vector<std::uint8_t> dst(w->nbytes);
    EXPECT_EQ(pack_half(*w, dst).code(), ErrorCode::kInvalidArgument);
  }
  const test::StoredWeights ok = test::random_half_weights(DType::kBF16, 16, 64, rng);
  EXPECT_TRUE(half_packable(ok.view));
  std::vector<std::uint8_t> short_dst(ok.view.nbytes - 1);
  EXPECT_EQ(pack_half(ok.view, short_dst).code(), ErrorCode::kInvalidArgument);
  TensorView flat = ok.view;
  flat.shape = {16 * 64};
  EXPECT_FALSE(half_packable(flat));
}

// matmul on a packed matrix is the packed GEMV up to kHalfPackedTokens tokens and the row-major
// GEMM past them; matmul_fused on Q/K/V-like products of one input plus a down-like product of
// another gives exactly one matmul each.
TEST(HalfPacked, MatmulAndFusedProductsTakeThePackedPath) {
  std::mt19937 rng(34);
  const Shape shapes[] = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 5632}};
  std::vector<Packed> weights;
  for (Shape s : shapes) weights.push_back(packed_copy(DType::kF16, s, rng));
  ThreadPool pool(2);
  for (std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{3}, std::int64_t{8}, kHalfPackedTokens, kHalfPackedTokens + 1}) {
    const auto x = test::random_activations(n_tokens, 2048, rng), x_down = test::random_activations(n_tokens, 5632, rng);
    std::vector<std::vector<float>> fused, alone;
    std::vector<MatmulProduct> products;
    for (const Packed& p : weights) {
      fused.emplace_back(static_cast<std::size_t>(n_tokens * p.weights.view.n_rows()), NAN);
      alone.emplace_back(fused.back().size(), NAN);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const TensorView& w = weights[i].weights.view;
      products.push_back({&w, w.row_length() == 2048 ? std::span<const float>(x) : x_down, fused[i]});
    }
    matmul_fused(products, n_tokens, pool, /*min_parallel_macs=*/0);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      matmul(*products[i].w, products[i].x, n_tokens, alone[i], pool, 0);
      EXPECT_EQ(fused[i], alone[i]) << "product " << i << " n_tokens=" << n_tokens;
      if (n_tokens > kHalfPackedTokens) continue;
      std::vector<float> twin(alone[i].size());
      gemv_half_packed_reference(*products[i].w, products[i].x, n_tokens, twin);
      EXPECT_EQ(alone[i], twin) << "product " << i << " n_tokens=" << n_tokens;
    }
  }
}

}  // namespace
}  // namespace peregrine

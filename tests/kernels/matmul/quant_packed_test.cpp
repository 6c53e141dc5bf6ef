// Q4_0 and Q8_0 weights repacked 16 rows in lanes (kernels/cpu/matmul/quant_packed.h): the scalar twin
// over the packed layout equals gemm_quant_reference on the original rows bit for bit (so the
// packing loses nothing and puts every code and scale where the layout says), and the SIMD GEMV
// matches the twin up to summation order on every target.
#include "peregrine/kernels/cpu/matmul/quant_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "peregrine/kernels/cpu/matmul/gemm_quant.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

struct Shape {
  std::int64_t out, in;
};
// Odd block counts (33·32, 257·32) as well as the tinyllama row lengths; 16 and 13 groups for the
// single-token kernel's kDecodeStreams side-by-side parts (whole, and with groups left over).
constexpr Shape kShapes[] = {{16, 32}, {32, 96}, {48, 2048}, {16, 33 * 32}, {64, 5632}, {16, 257 * 32}, {256, 64}, {208, 96}};
// Every chunk remainder of the kernel's 8 tokens per pass, and prefill-sized batches.
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 32, 33, 64, 129};

constexpr DType kPackedTypes[] = {DType::kQ4_0, DType::kQ8_0};

// `w` packed into a buffer of its own.
std::vector<std::uint8_t> packed_copy(const TensorView& w) {
  std::vector<std::uint8_t> dst(w.nbytes);
  const Status st = pack_quant(w, dst);
  EXPECT_TRUE(st) << st.message();
  return dst;
}

QuantizedActivations quantized(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng) {
  QuantizedActivations xq;
  quantize_activations_reference(test::random_activations(n_tokens, in, rng), n_tokens, in, xq);
  return xq;
}

TEST(QuantPacked, TwinOverThePackedLayoutEqualsTheRowMajorReference) {
  std::mt19937 rng(21);
  for (DType dtype : kPackedTypes) for (Shape s : kShapes) {
    const test::BlockWeights w = test::random_block_weights(dtype, s.out, s.in, /*offset=*/5, rng);
    const std::vector<std::uint8_t> packed = packed_copy(w.view);
    for (std::int64_t n_tokens : kTokenCounts) {
      const QuantizedActivations xq = quantized(n_tokens, s.in, rng);
      std::vector<float> expected(static_cast<std::size_t>(n_tokens * s.out)), got(expected.size());
      gemm_quant_reference(w.view, xq, expected);
      gemv_quant_packed_reference({dtype, packed.data(), s.out, &xq, got});
      EXPECT_EQ(got, expected) << dtype_name(dtype) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens;
    }
  }
}

// The SIMD kernel adds the same exact terms d_w·d_x·(int dot) per row in block order, with a
// fused multiply-add instead of the twin's product and sum (k <= blocks + 2 roundings per term
// in both): |simd − twin| <= 2·γ_{blocks+2}·M.
TEST(QuantPacked, GemvMatchesTheTwinUpToRounding) {
  std::mt19937 rng(22);
  for (DType dtype : kPackedTypes) for (Shape s : kShapes) {
    const test::BlockWeights w = test::random_block_weights(dtype, s.out, s.in, /*offset=*/0, rng);
    const std::vector<std::uint8_t> packed = packed_copy(w.view);
    const double bound = 2.0 * test::f32_gamma(static_cast<double>(s.in / 32 + 2));
    for (std::int64_t n_tokens : kTokenCounts) {
      const QuantizedActivations xq = quantized(n_tokens, s.in, rng);
      std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out));
      gemv_quant_packed_reference({dtype, packed.data(), s.out, &xq, ref});
      test::for_each_simd_target([&] {
        for (int threads : {1, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(ref.size(), NAN);
          const PackedProduct product{dtype, packed.data(), s.out, &xq, y};
          gemv_quant_packed({&product, 1}, pool, /*min_parallel_macs=*/0);
          for (std::int64_t t = 0; t < n_tokens; ++t) {
            for (std::int64_t o = 0; o < s.out; ++o) {
              const auto i = static_cast<std::size_t>(t * s.out + o);
              ASSERT_NEAR(y[i], ref[i], bound * test::term_magnitude(w.view, xq, o, t))
                  << dtype_name(dtype) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens << " threads=" << threads << " token " << t
                  << " row " << o;
            }
          }
        }
      });
    }
  }
}

TEST(QuantPacked, RefusesWhatItCannotPack) {
  std::mt19937 rng(23);
  const test::BlockWeights q4_1 = test::random_block_weights(DType::kQ4_1, 16, 64, 0, rng);
  const test::BlockWeights rows = test::random_block_weights(DType::kQ8_0, 24, 64, 0, rng);  // not whole groups
  for (const TensorView* w : {&q4_1.view, &rows.view}) {
    EXPECT_FALSE(quant_packable(*w));
    std::vector<std::uint8_t> dst(w->nbytes);
    EXPECT_EQ(pack_quant(*w, dst).code(), ErrorCode::kInvalidArgument);
  }
  const test::BlockWeights ok = test::random_block_weights(DType::kQ8_0, 16, 64, 0, rng);
  std::vector<std::uint8_t> short_dst(ok.view.nbytes - 1);
  EXPECT_EQ(pack_quant(ok.view, short_dst).code(), ErrorCode::kInvalidArgument);
  TensorView flat = rows.view;
  flat.shape = {24 * 64};
  EXPECT_FALSE(quant_packable(flat));
}

// matmul_fused on Q/K/V-like products (2048 → 2048, 256, 256) of one input plus a down-like
// product (5632 → 2048) of another, all packed, Q4_0 and Q8_0 mixed (as in a Q4_0 file whose
// V is Q8_0), in one parallel region, gives exactly what matmul gives for each: every row is
// the same kernel over the same quantized activations, whichever thread takes it.
TEST(QuantPacked, FusedProductsEqualOneMatmulEach) {
  std::mt19937 rng(24);
  struct Shape {
    std::int64_t out, in;
  };
  const Shape shapes[] = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 5632}};
  const DType dtypes[] = {DType::kQ4_0, DType::kQ4_0, DType::kQ8_0, DType::kQ8_0};
  std::vector<test::BlockWeights> weights;
  std::vector<std::vector<std::uint8_t>> packed;
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    const Shape s = shapes[i];
    weights.push_back(test::random_block_weights(dtypes[i], s.out, s.in, /*offset=*/0, rng));
    packed.push_back(packed_copy(weights.back().view));
    weights.back().view.packed = packed.back().data();
  }
  ThreadPool pool(2);
  for (std::int64_t n_tokens : {1, 3, 8, 9, 33, 130}) {
    const auto x = test::random_activations(n_tokens, 2048, rng), x_down = test::random_activations(n_tokens, 5632, rng);
    std::vector<std::vector<float>> fused, alone;
    std::vector<MatmulProduct> products;
    for (const auto& w : weights) {
      fused.emplace_back(static_cast<std::size_t>(n_tokens * w.view.n_rows()), NAN);
      alone.emplace_back(fused.back().size(), NAN);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      products.push_back({&weights[i].view, weights[i].view.row_length() == 2048 ? std::span<const float>(x) : x_down, fused[i]});
    }
    matmul_fused(products, n_tokens, pool, /*min_parallel_macs=*/0);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      matmul(weights[i].view, products[i].x, n_tokens, alone[i], pool, 0);
      EXPECT_EQ(fused[i], alone[i]) << "product " << i << " n_tokens=" << n_tokens;
    }
  }
}

}  // namespace
}  // namespace peregrine

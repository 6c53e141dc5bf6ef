// The packed 2:4 Q4_0 / Q8_0 decode GEMV (kernels/cpu/sparse/sparse_nm_q8_packed.h): the SIMD kernel
// gives its scalar twin's bits for every token count and thread count, alone and fused with
// other products; the twin over the packed layout is the stored matrix's product with the
// dequantized activation blocks (so packing put every code, position and scale where the
// layout says); matmul takes it for packed weights; and bad matrices are refused.
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/sparse_nm.h"
#include "sparse_nm_fixtures.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

// A random [out, in] matrix pruned n:m (default 2:4) by magnitude, encoded in `base`, packed
// when packable.
struct Packed {
  SparseEncoded encoded;
  std::vector<std::uint8_t> packed;
  TensorView view;
};
Packed packed_weights(SparseBase base, std::int64_t out, std::int64_t in, std::mt19937& rng,
                      SparsePattern pattern = {2, 4}) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = dist(rng);
  prune_nm_by_magnitude(w, pattern.n, pattern.m);
  auto e = encode_sparse_nm(w, out, in, pattern, base);
  EXPECT_TRUE(e) << e.status().message();
  Packed p{std::move(*e), {}, {}};
  p.view = TensorView{std::string("w"), p.encoded.dtype, {out, in}, p.encoded.bytes.data(), p.encoded.bytes.size()};
  if (sparse_q8_packable(p.view)) {
    p.packed.resize(sparse_q8_packed_bytes(p.view));
    const Status st = pack_sparse_q8(p.view, p.packed);
    EXPECT_TRUE(st) << st.message();
    p.view.packed = p.packed.data();
  }
  return p;
}

constexpr SparseBase kBases[] = {SparseBase::kQ4, SparseBase::kQ8};
struct Shape {
  std::int64_t out, in;
};
constexpr Shape kShapes[] = {{16, 64}, {32, 192}, {48, 2048}, {16, 5632}};

TEST(SparseQ8Packed, TwinIsTheStoredProductWithTheActivationBlocks) {
  std::mt19937 rng(51);
  ThreadPool pool(1);
  for (SparseBase base : kBases) {
    for (Shape s : kShapes) {
      const Packed w = packed_weights(base, s.out, s.in, rng);
      ASSERT_NE(w.view.packed, nullptr);
      EXPECT_EQ(sparse_q8_packed_bytes(w.view), w.view.nbytes);
      for (std::int64_t n_tokens : {1, 3}) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        QuantizedActivations xq;
        quantize_activations(x, n_tokens, s.in, xq, pool, 0, kActivationBlockQ8_0);
        std::vector<float> twin(static_cast<std::size_t>(n_tokens * s.out), NAN);
        gemv_sparse_q8_packed_reference({&w.view, &xq, twin});
        std::vector<float> row(static_cast<std::size_t>(s.in));
        for (std::int64_t o = 0; o < s.out; ++o) {
          dequantize_row(w.view, o, row);
          for (std::int64_t t = 0; t < n_tokens; ++t) {
            double exact = 0.0, magnitude = 0.0;
            for (std::int64_t j = 0; j < s.in; ++j) {
              const auto i = static_cast<std::size_t>(t * s.in + j);
              const double xv = static_cast<double>(xq.d[i / 32]) * xq.q[i];
              exact += row[static_cast<std::size_t>(j)] * xv;
              magnitude += std::fabs(row[static_cast<std::size_t>(j)] * xv);
            }
            ASSERT_NEAR(twin[static_cast<std::size_t>(t * s.out + o)], exact, 1e-5 * magnitude + 1e-6)
                << dtype_name(w.view.dtype) << " " << s.out << "x" << s.in << " token " << t << " row " << o;
          }
        }
      }
    }
  }
}

TEST(SparseQ8Packed, GemvEqualsTheTwinBitForBit) {
  if (!sparse_q8_packed_gemv_available()) GTEST_SKIP() << "no AVX-512 VNNI + VBMI on this CPU";
  std::mt19937 rng(52);
  for (SparseBase base : kBases) {
    for (Shape s : kShapes) {
      const Packed w = packed_weights(base, s.out, s.in, rng);
      for (std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}, std::int64_t{7}, std::int64_t{33}}) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        ThreadPool quantizer(1);
        QuantizedActivations xq;
        quantize_activations(x, n_tokens, s.in, xq, quantizer, 0, kActivationBlockQ8_0);
        std::vector<float> twin(static_cast<std::size_t>(n_tokens * s.out), NAN);
        gemv_sparse_q8_packed_reference({&w.view, &xq, twin});
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(twin.size(), NAN);
          const SparseQ8Product product{&w.view, &xq, y};
          gemv_sparse_q8_packed({&product, 1}, pool, /*min_parallel_macs=*/0);
          EXPECT_EQ(y, twin) << dtype_name(w.view.dtype) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens
                             << " threads=" << threads;
          // Through matmul, which quantizes x itself.
          std::vector<float> via_matmul(twin.size(), NAN);
          matmul(w.view, x, n_tokens, via_matmul, pool, 0);
          EXPECT_EQ(via_matmul, twin) << "matmul " << dtype_name(w.view.dtype) << " n_tokens=" << n_tokens;
        }
      }
    }
  }
}

TEST(SparseQ8Packed, FusedProductsEachGiveTheirTwinsBits) {
  if (!sparse_q8_packed_gemv_available()) GTEST_SKIP() << "no AVX-512 VNNI + VBMI on this CPU";
  std::mt19937 rng(53);
  const Packed q = packed_weights(SparseBase::kQ4, 64, 256, rng), k = packed_weights(SparseBase::kQ8, 32, 256, rng);
  const Packed down = packed_weights(SparseBase::kQ4, 48, 128, rng);
  ThreadPool pool(2);
  for (std::int64_t n_tokens : {1, 5}) {
    const auto x = test::random_activations(n_tokens, 256, rng), h = test::random_activations(n_tokens, 128, rng);
    std::vector<float> yq(static_cast<std::size_t>(n_tokens * 64), NAN), yk(static_cast<std::size_t>(n_tokens * 32), NAN),
        yd(static_cast<std::size_t>(n_tokens * 48), NAN);
    const MatmulProduct products[] = {{&q.view, x, yq}, {&k.view, x, yk}, {&down.view, h, yd}};
    matmul_fused(products, n_tokens, pool, 0);
    for (const MatmulProduct& p : products) {
      std::vector<float> alone(p.y.size(), NAN);
      matmul(*p.w, p.x, n_tokens, alone, pool, 0);
      EXPECT_EQ(std::vector<float>(p.y.begin(), p.y.end()), alone) << dtype_name(p.w->dtype) << " n_tokens=" << n_tokens;
    }
  }
}

TEST(SparseQ8Packed, RefusesWhatItCannotPack) {
  std::mt19937 rng(54);
  const Packed rows = packed_weights(SparseBase::kQ4, 24, 64, rng);   // not whole 16-row groups
  const Packed s48 = packed_weights(SparseBase::kQ8, 16, 128, rng, {4, 8});  // not 2:4
  const Packed half = packed_weights(SparseBase::kF16, 16, 64, rng);  // not a quantized dtype
  for (const Packed* p : {&rows, &s48, &half}) {
    EXPECT_FALSE(sparse_q8_packable(p->view)) << dtype_name(p->view.dtype);
    std::vector<std::uint8_t> dst(p->view.nbytes * 2);
    EXPECT_EQ(pack_sparse_q8(p->view, dst).code(), ErrorCode::kInvalidArgument);
  }
  Packed ok = packed_weights(SparseBase::kQ4, 16, 128, rng);
  std::vector<std::uint8_t> dst(sparse_q8_packed_bytes(ok.view));
  EXPECT_EQ(pack_sparse_q8(ok.view, std::span<std::uint8_t>(dst).first(dst.size() - 1)).code(), ErrorCode::kInvalidArgument);
  const std::size_t mask_at = 2 * 18;  // row 5's mask, after its two stored blocks
  ok.encoded.bytes[5 * *ok.view.row_bytes() + mask_at] = 0x7f;  // groups 0 and 1 mark 4 and 3 columns
  const Status st = pack_sparse_q8(ok.view, dst);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 5 group 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace peregrine

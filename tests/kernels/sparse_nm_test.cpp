// N:M sparse weights (quant/sparse_nm.h) in the matmul: the packed 2:4 F16 / BF16 GEMV
// (kernels/cpu/sparse_nm_packed.h) gives its scalar twin's bits on every SIMD target and thread
// count, the twin is matmul_reference up to summation order (so packing puts every kept value
// and position where the layout says), and matmul on every sparse dtype — packed or not, decode
// and prefill token counts, odd row counts — is matmul_reference within the f32 summation bound.
#include "peregrine/kernels/cpu/sparse_nm_packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "peregrine/kernels/cpu/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/sparse_nm.h"
#include "simd_targets.h"
#include "sparse_nm_fixtures.h"
#include "weight_fixtures.h"

namespace peregrine {
namespace {

struct Shape {
  std::int64_t out, in;
};

// A random [out, in] matrix pruned n:m by magnitude and encoded, with w.packed set when asked
// (and packable).
struct SparseWeights {
  SparseEncoded encoded;
  std::vector<std::uint8_t> packed;
  TensorView view;
};
SparseWeights sparse_weights(SparseBase base, SparsePattern p, Shape s, bool pack, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(s.out * s.in));
  for (float& v : w) v = dist(rng);
  prune_nm_by_magnitude(w, p.n, p.m);
  auto e = encode_sparse_nm(w, s.out, s.in, p, base);
  EXPECT_TRUE(e) << e.status().message();
  SparseWeights sw{std::move(*e), {}, {}};
  sw.view = TensorView{std::string("w"), sw.encoded.dtype, {s.out, s.in}, sw.encoded.bytes.data(), sw.encoded.bytes.size()};
  if (pack) {
    EXPECT_TRUE(sparse_packable(sw.view));
    sw.packed.resize(sparse_packed_bytes(sw.view));
    const Status st = pack_sparse_nm(sw.view, sw.packed);
    EXPECT_TRUE(st) << st.message();
    sw.view.packed = sw.packed.data();
  }
  return sw;
}

// |got − matmul_reference| <= 2·γ_{in+2}·Σ|w·x| per output (the twin / float tiles sum the
// products in f32 with at most in + 2 roundings each; the reference in f64).
void expect_near_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                           const std::vector<float>& got, const std::string& what) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> ref(got.size()), dense(static_cast<std::size_t>(out * in));
  matmul_reference(w, x, n_tokens, ref);
  for (std::int64_t o = 0; o < out; ++o) dequantize_row(w, o, std::span<float>(dense).subspan(static_cast<std::size_t>(o * in), static_cast<std::size_t>(in)));
  const double bound = 2.0 * test::f32_gamma(static_cast<double>(in + 2));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      double magnitude = 0.0;
      for (std::int64_t i = 0; i < in; ++i) magnitude += std::fabs(static_cast<double>(dense[static_cast<std::size_t>(o * in + i)]) * x[static_cast<std::size_t>(t * in + i)]);
      const auto k = static_cast<std::size_t>(t * out + o);
      ASSERT_NEAR(got[k], ref[k], bound * magnitude + 1e-30) << what << " token " << t << " row " << o;
    }
  }
}

// Row lengths with a partial last chunk (in / 4 groups not a multiple of 4) and tinyllama's.
constexpr Shape kPackedShapes[] = {{16, 4}, {16, 12}, {32, 20}, {48, 64}, {16, 260}, {32, 2048}, {16, 5632}};
constexpr SparseBase kHalfBases[] = {SparseBase::kF16, SparseBase::kBF16};

TEST(SparseNmPacked, GemvEqualsTheTwinBitForBit) {
  std::mt19937 rng(41);
  for (SparseBase base : kHalfBases) {
    for (Shape s : kPackedShapes) {
      const SparseWeights w = sparse_weights(base, {2, 4}, s, true, rng);
      for (std::int64_t n_tokens : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{5}, kSparsePackedTokens}) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out));
        gemv_sparse_packed_reference(w.view, x, n_tokens, ref);
        test::for_each_simd_target([&] {
          for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            std::vector<float> y(ref.size(), NAN);
            const MatmulProduct product{&w.view, x, y};
            gemv_sparse_packed({&product, 1}, n_tokens, pool, /*min_parallel_macs=*/0);
            EXPECT_EQ(y, ref) << dtype_name(w.view.dtype) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens
                              << " threads=" << threads;
          }
        });
      }
    }
  }
}

TEST(SparseNmPacked, TwinOverThePackedLayoutIsTheDenseProduct) {
  std::mt19937 rng(42);
  for (SparseBase base : kHalfBases) {
    for (Shape s : kPackedShapes) {
      const SparseWeights w = sparse_weights(base, {2, 4}, s, true, rng);
      for (std::int64_t n_tokens : {1, 5}) {
        const auto x = test::random_activations(n_tokens, s.in, rng);
        std::vector<float> got(static_cast<std::size_t>(n_tokens * s.out));
        gemv_sparse_packed_reference(w.view, x, n_tokens, got);
        expect_near_reference(w.view, x, n_tokens, got, std::string(dtype_name(w.view.dtype)) + " twin");
      }
    }
  }
}

// Every sparse dtype through matmul with odd row counts (unpacked: the decoded panels), the
// packed ones through matmul / matmul_fused too; 1, 2, 5 and 40 tokens (40: the prefill GEMM).
TEST(SparseNmMatmul, EveryDtypeIsTheReferenceProduct) {
  std::mt19937 rng(43);
  struct Case { SparseBase base; SparsePattern p; Shape s; bool pack; };
  const Case cases[] = {
      {SparseBase::kF16, {2, 4}, {37, 68}, false},   {SparseBase::kBF16, {2, 4}, {53, 12}, false},
      {SparseBase::kQ8, {2, 4}, {29, 128}, false},   {SparseBase::kQ4, {2, 4}, {99, 192}, false},
      {SparseBase::kF16, {4, 8}, {37, 72}, false},   {SparseBase::kBF16, {4, 8}, {17, 8}, false},
      {SparseBase::kQ8, {4, 8}, {31, 64}, false},    {SparseBase::kQ4, {4, 8}, {61, 128}, false},
      {SparseBase::kF16, {2, 4}, {64, 260}, true},   {SparseBase::kBF16, {2, 4}, {112, 96}, true}};
  for (const Case& c : cases) {
    const SparseWeights w = sparse_weights(c.base, c.p, c.s, c.pack, rng);
    for (std::int64_t n_tokens : {1, 2, 5, 40}) {
      const auto x = test::random_activations(n_tokens, c.s.in, rng);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(static_cast<std::size_t>(n_tokens * c.s.out), NAN);
        matmul(w.view, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
        const std::string what = std::string(dtype_name(w.view.dtype)) + (c.pack ? " packed" : "") +
                                 " n_tokens=" + std::to_string(n_tokens) + " threads=" + std::to_string(threads);
        expect_near_reference(w.view, x, n_tokens, y, what);
        if (!c.pack || n_tokens > kSparsePackedTokens) continue;
        std::vector<float> twin(y.size()), fused(y.size(), NAN);
        gemv_sparse_packed_reference(w.view, x, n_tokens, twin);
        EXPECT_EQ(y, twin) << what;
        const MatmulProduct products[] = {{&w.view, x, fused}};
        matmul_fused(products, n_tokens, pool, 0);
        EXPECT_EQ(fused, twin) << what;
      }
    }
  }
}

TEST(SparseNmPacked, RefusesWhatItCannotPack) {
  std::mt19937 rng(44);
  const SparseWeights rows = sparse_weights(SparseBase::kF16, {2, 4}, {24, 64}, false, rng);  // not whole groups
  const SparseWeights q4 = sparse_weights(SparseBase::kQ4, {2, 4}, {16, 64}, false, rng);
  const SparseWeights s48 = sparse_weights(SparseBase::kF16, {4, 8}, {16, 64}, false, rng);
  for (const TensorView* w : {&rows.view, &q4.view, &s48.view}) {
    EXPECT_FALSE(sparse_packable(*w)) << dtype_name(w->dtype);
    std::vector<std::uint8_t> dst(w->nbytes * 2);
    EXPECT_EQ(pack_sparse_nm(*w, dst).code(), ErrorCode::kInvalidArgument);
  }
  SparseWeights ok = sparse_weights(SparseBase::kF16, {2, 4}, {16, 64}, false, rng);
  std::vector<std::uint8_t> dst(sparse_packed_bytes(ok.view));
  EXPECT_EQ(pack_sparse_nm(ok.view, std::span<std::uint8_t>(dst).first(dst.size() - 1)).code(), ErrorCode::kInvalidArgument);
  ok.encoded.bytes[5 * *ok.view.row_bytes() + 64] = 0x7f;  // row 5: groups 0 and 1 mark 4 and 3 columns
  const Status st = pack_sparse_nm(ok.view, dst);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 5 group 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace peregrine

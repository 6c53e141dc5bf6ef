// N:M sparse weights (quant/sparse_nm.h) in the matmul: the packed 2:4 F16 / BF16 GEMV
// (kernels/cpu/sparse/sparse_nm_packed.h) gives its scalar twin's bits on every SIMD target and thread
// count, the twin is matmul_reference up to summation order (so packing puts every kept value
// and position where the layout says), and matmul on every sparse dtype — packed or not, decode
// and prefill token counts, odd row counts — is matmul_reference within the f32 summation bound,
// except the quantized dtypes at decode sizes, which take the GEMV against 8-bit activation
// blocks (sparse_nm_q8.h: its twin's bits; the twin is the dequantized product). The panel
// decoder (sparse_nm_expand.h) gives the row decoder's bits.
#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_expand.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/sparse_nm.h"
#include "kernels/simd_targets.h"
#include "sparse_nm_fixtures.h"
#include "kernels/weight_fixtures.h"

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
        const bool quantized = c.base == SparseBase::kQ8 || c.base == SparseBase::kQ4;
        if (quantized && n_tokens <= kSparseQ8Tokens && sparse_q8_supported()) {
          // Decode sizes take gemv_sparse_q8 (8-bit activation blocks): its twin's bits, which
          // SparseNmQ8 checks against the dequantized product.
          QuantizedActivations xq;
          quantize_activations(x, n_tokens, c.s.in, xq, pool, 0, kActivationBlockQ8_0);
          std::vector<float> twin(y.size());
          gemv_sparse_q8_reference(w.view, xq, twin);
          EXPECT_EQ(y, twin) << what;
          continue;
        }
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

TEST(SparseNmExpand, EveryRowIsTheDecodeTwinsBitForBit) {
  // Widths off 16 (the expand-load's step) and off 8 (a mask byte), every kept dtype, and a row
  // whose mask was damaged (one bit flipped): that one goes through the twin itself.
  std::mt19937 rng(44);
  struct Case { SparseBase base; SparsePattern p; Shape s; };
  const Case cases[] = {{SparseBase::kF16, {2, 4}, {5, 68}},   {SparseBase::kBF16, {2, 4}, {3, 12}},
                        {SparseBase::kQ8, {2, 4}, {4, 192}},  {SparseBase::kQ4, {2, 4}, {6, 2048}},
                        {SparseBase::kF16, {4, 8}, {3, 104}}, {SparseBase::kBF16, {4, 8}, {2, 8}},
                        {SparseBase::kQ8, {4, 8}, {3, 64}},   {SparseBase::kQ4, {4, 8}, {2, 320}},
                        {SparseBase::kF16, {2, 4}, {3, 4}}};
  for (const Case& c : cases) {
    SparseWeights w = sparse_weights(c.base, c.p, c.s, false, rng);
    const std::size_t cols = static_cast<std::size_t>(c.s.in), row_bytes = *w.view.row_bytes();
    w.encoded.bytes[row_bytes - (cols + 7) / 8] ^= 0x01;  // row 0: the first column's mask bit flipped
    for (std::int64_t r = 0; r < c.s.out; ++r) {
      std::vector<float> fast(cols, NAN), twin(cols, NAN);
      expand_sparse_nm_row(w.view, r, fast);
      decode_sparse_nm_row(w.view.dtype, w.encoded.bytes.data() + static_cast<std::size_t>(r) * row_bytes, twin);
      for (std::size_t j = 0; j < cols; ++j) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(fast[j]), std::bit_cast<std::uint32_t>(twin[j]))
            << dtype_name(w.view.dtype) << " row " << r << " column " << j;
      }
    }
  }
}

TEST(SparseNmQ8, GemvIsItsTwinAndTheDequantizedProduct) {
  // The SIMD GEMV gives its twin's bits; the twin is the product of the dequantized weights and
  // the dequantized activation blocks within f32 rounding (so every kept code meets the
  // activation of its column).
  std::mt19937 rng(45);
  struct Case { SparseBase base; SparsePattern p; Shape s; };
  const Case cases[] = {{SparseBase::kQ4, {2, 4}, {7, 64}}, {SparseBase::kQ8, {2, 4}, {5, 192}},
                        {SparseBase::kQ4, {4, 8}, {3, 256}}, {SparseBase::kQ8, {4, 8}, {9, 128}}};
  for (const Case& c : cases) {
    const SparseWeights w = sparse_weights(c.base, c.p, c.s, false, rng);
    for (std::int64_t n_tokens : {1, 3}) {
      const auto x = test::random_activations(n_tokens, c.s.in, rng);
      ThreadPool pool(2);
      QuantizedActivations xq;
      quantize_activations(x, n_tokens, c.s.in, xq, pool, 0, kActivationBlockQ8_0);
      std::vector<float> twin(static_cast<std::size_t>(n_tokens * c.s.out), NAN);
      gemv_sparse_q8_reference(w.view, xq, twin);
      const std::string what = std::string(dtype_name(w.view.dtype)) + " n_tokens=" + std::to_string(n_tokens);
      if (sparse_q8_supported()) {
        std::vector<float> y(twin.size(), NAN);
        gemv_sparse_q8(w.view, xq, y, pool, 0);
        EXPECT_EQ(y, twin) << what;
      }
      std::vector<float> row(static_cast<std::size_t>(c.s.in));
      for (std::int64_t o = 0; o < c.s.out; ++o) {
        dequantize_row(w.view, o, row);
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          double exact = 0.0, magnitude = 0.0;
          for (std::int64_t j = 0; j < c.s.in; ++j) {
            const double xv = static_cast<double>(xq.d[static_cast<std::size_t>((t * c.s.in + j) / 32)]) *
                              xq.q[static_cast<std::size_t>(t * c.s.in + j)];
            exact += row[static_cast<std::size_t>(j)] * xv;
            magnitude += std::fabs(row[static_cast<std::size_t>(j)] * xv);
          }
          EXPECT_NEAR(twin[static_cast<std::size_t>(t * c.s.out + o)], exact, 1e-5 * magnitude + 1e-6) << what << " row " << o;
        }
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

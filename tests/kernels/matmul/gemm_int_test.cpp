// matmul on group-wise integer weights with f32 activations (kInt, act_bits 16: gemm_int)
// against its scalar twin matmul_reference, and on a real stories260K weight against the f32
// product.
#include "peregrine/kernels/cpu/matmul/gemm_int.h"

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
#include "test_models.h"
#include "kernels/weight_fixtures.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/kernels/cpu/elementwise/elementwise.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/int_group.h"

namespace peregrine {
namespace {

using test::random_activations;

// Row lengths: 1 and 7 (below a vector), 33, 100 and 300 (off the SIMD widths and the 32-value
// decode unit), 172 (stories260K's FFN width), 256 (a whole GEMM input block).
constexpr std::int64_t kRowLengths[] = {1, 7, 33, 100, 172, 256, 300};
// 1: the fused decode GEMV; 2–4: units decoded once in registers for every token; 5: rows decoded
// once into a buffer for every token; 40: the GEMM.
constexpr std::int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 40};
// 13 rows: a partial tile for the GEMV (4 rows) and the GEMM (12 or 6 rows).
constexpr std::int64_t kRows = 13;

// matmul (every SIMD target, 1 and 2 threads) against matmul_reference on the same stored
// weights. The reference sums W_i·x_i exactly in f64 and rounds once (<= u·|ref|). The kernels
// sum the same products in f32 in some order (lanes, chains, tiles), either of exact weights
// (the dequantizing multiply-add is exact, int_decode-inl.h) or of (q − zero)·x per group then
// scaled by the group's scale: each product passes through its own rounding (none when fused),
// at most in − 1 additions and at most one scaling, k = in + 1 roundings, so
// |y − ref| <= γ_{in+1} · Σ_i |W_i·x_i| + u·|ref|.
void expect_matches_reference(const TensorView& w, std::mt19937& rng, const std::string& label) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> wf(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o) {
    dequantize_row(w, o, std::span<float>(wf).subspan(static_cast<std::size_t>(o * in), static_cast<std::size_t>(in)));
  }
  for (std::int64_t n_tokens : kTokenCounts) {
    const auto x = random_activations(n_tokens, in, rng);
    std::vector<float> ref(static_cast<std::size_t>(n_tokens * out));
    matmul_reference(w, x, n_tokens, ref);
    std::vector<double> bound(ref.size());
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      for (std::int64_t o = 0; o < out; ++o) {
        double m = 0.0;
        for (std::int64_t i = 0; i < in; ++i) {
          m += std::fabs(static_cast<double>(wf[static_cast<std::size_t>(o * in + i)]) * x[static_cast<std::size_t>(t * in + i)]);
        }
        const auto k = static_cast<std::size_t>(t * out + o);
        bound[k] = test::f32_gamma(static_cast<double>(in + 1)) * m + std::ldexp(std::fabs(ref[k]), -24);
      }
    }
    test::for_each_simd_target([&] {
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> y(ref.size(), NAN);
        matmul(w, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
        for (std::size_t k = 0; k < y.size(); ++k) {
          ASSERT_NEAR(y[k], ref[k], bound[k]) << label << " in=" << in << " n_tokens=" << n_tokens
                                              << " threads=" << threads << " token " << k / static_cast<std::size_t>(out)
                                              << " row " << k % static_cast<std::size_t>(out);
        }
      }
    });
  }
}

std::string describe(const QuantParams& p) {
  std::ostringstream s;
  s << "W" << p.bits << "A" << p.act_bits << " " << (p.asymmetric ? "asym" : "sym") << " group " << p.group_size;
  return s.str();
}

TEST(GemmInt, MatchesReferenceForEveryBitWidthGroupAndRowLength) {
  std::mt19937 rng(61);
  for (int bits : {2, 3, 4, 8}) {
    for (bool asymmetric : {false, true}) {
      for (std::int64_t group : {32, 64, 128, 0}) {  // 0: per-channel (one group per row)
        for (std::int64_t in : kRowLengths) {
          const QuantParams p{bits, group == 0 ? in : group, asymmetric};
          const auto w = test::random_int_weights(kRows, in, p, rng);
          expect_matches_reference(w.view, rng, describe(p));
        }
      }
    }
  }
}

TEST(GemmInt, GroupsThatCrossSimdVectorsAndDecodeUnits) {
  // Any group size is valid: groups of 1, 5, 24, 48 or 100 values start inside a vector;
  // groups of 2, 8 and 16 (and 2-bit groups of 32 on AVX-512) tile a decode unit, whose lanes
  // then take their scales from a vector of the unit's groups.
  std::mt19937 rng(62);
  for (int bits : {2, 3, 4}) {
    for (std::int64_t group : {1, 2, 5, 8, 16, 24, 48, 100}) {
      for (std::int64_t in : {7, 172, 300}) {
        const QuantParams p{bits, group, /*asymmetric=*/true};
        const auto w = test::random_int_weights(kRows, in, p, rng);
        expect_matches_reference(w.view, rng, describe(p));
      }
    }
  }
}

TEST(GemmInt, ZeroRowsOrZeroTokensWriteNothing) {
  std::mt19937 rng(63);
  const QuantParams p{4, 32, false};
  const auto w = test::random_int_weights(0, 64, p, rng);
  ThreadPool pool(2);
  std::vector<float> x(64), y;
  matmul(w.view, x, 1, y, pool, 0);
  const auto w2 = test::random_int_weights(3, 64, p, rng);
  matmul(w2.view, std::span<const float>(), 0, y, pool, 0);
  EXPECT_TRUE(y.empty());
}

// A real weight quantized by RTN (quantize_int_rtn) and multiplied by real activations (the
// token embeddings, and their SwiGLU FFN activations for ffn_down, in = 172): each stored weight
// differs from the f32 one by at most half its scale (symmetric RTN: |w/s| <= 2^(b−1) − 1 up to
// the f16 rounding of s, so no code clamps), hence
//   |y − y_f32| <= Σ_i (s_i/2)·|x_i|·(1 + 2^-20) + γ_in·(Σ|Ŵ_i x_i| + Σ|W_i x_i|) + u·|y_f32|,
// the middle term for the f32 sums of the kernel (as above), the last for the f64 reference's
// rounding.
void expect_within_quantization_bound(const TensorView& wf32, std::span<const float> x, std::int64_t n_tokens,
                                      const QuantParams& p) {
  const std::int64_t out = wf32.n_rows(), in = wf32.row_length();
  std::vector<float> wf(static_cast<std::size_t>(out * in));
  dequantize(DType::kF32, wf32.data, wf);
  const auto bytes = quantize_int_rtn(wf, out, in, p);
  const TensorView wq{"wq", DType::kInt, {out, in}, bytes.data(), bytes.size(), p};
  std::vector<float> exact(static_cast<std::size_t>(n_tokens * out)), y(exact.size());
  matmul_reference(wf32, x, n_tokens, exact);
  ThreadPool pool(2);
  matmul(wq, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
  std::vector<float> wd(static_cast<std::size_t>(in));
  double worst = 0.0;
  for (std::int64_t o = 0; o < out; ++o) {
    dequantize_row(wq, o, wd);
    const IntRow row = unpack_int_row(p, bytes.data() + static_cast<std::size_t>(o) * *wq.row_bytes(), in);
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      double bound = 0.0, m = 0.0;
      for (std::int64_t i = 0; i < in; ++i) {
        const double xi = x[static_cast<std::size_t>(t * in + i)];
        const double s = row.groups[static_cast<std::size_t>(i / p.group_size)].scale;
        bound += 0.5 * s * std::fabs(xi) * (1.0 + std::ldexp(1.0, -20));
        m += std::fabs(wd[static_cast<std::size_t>(i)] * xi) + std::fabs(wf[static_cast<std::size_t>(o * in + i)] * xi);
      }
      const auto k = static_cast<std::size_t>(t * out + o);
      bound += test::f32_gamma(static_cast<double>(in + 1)) * m + std::ldexp(std::fabs(exact[k]), -24);
      ASSERT_NEAR(y[k], exact[k], bound) << wf32.name << " " << describe(p) << " token " << t << " row " << o;
      worst = std::max(worst, std::fabs(y[k] - exact[k]) / bound);
    }
  }
  ::testing::Test::RecordProperty(wf32.name + " " + describe(p) + " error/bound", std::to_string(worst));
}

TEST(GemmInt, StoriesWeightsWithinTheRtnQuantizationBound) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  const TensorView* embd = file->find("token_embd.weight");
  const TensorView* gate = file->find(layer_tensor_name(0, "ffn_gate"));
  const TensorView* up = file->find(layer_tensor_name(0, "ffn_up"));
  const TensorView* down = file->find(layer_tensor_name(0, "ffn_down"));
  ASSERT_TRUE(embd && gate && up && down);
  ASSERT_EQ(down->row_length(), 172);
  // Activations: 9 token embeddings, and the layer-0 SwiGLU FFN activations they produce.
  const std::int64_t n_tokens = 9, dim = embd->row_length(), ffn = gate->n_rows();
  std::vector<float> x(static_cast<std::size_t>(n_tokens * dim));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    dequantize_row(*embd, 37 * t + 5, std::span<float>(x).subspan(static_cast<std::size_t>(t * dim), static_cast<std::size_t>(dim)));
  }
  std::vector<float> g(static_cast<std::size_t>(n_tokens * ffn)), u(g.size());
  matmul_reference(*gate, x, n_tokens, g);
  matmul_reference(*up, x, n_tokens, u);
  swiglu_reference(g.data(), u.data(), n_tokens * ffn);
  for (const QuantParams& p : {QuantParams{8, 172, false}, QuantParams{4, 32, false}, QuantParams{3, 64, false}}) {
    expect_within_quantization_bound(*down, g, n_tokens, p);
    for (std::int64_t n : {std::int64_t{1}, n_tokens}) {
      QuantParams pg = p;
      pg.group_size = p.group_size == 172 ? dim : p.group_size;
      expect_within_quantization_bound(*gate, x, n, pg);
    }
  }
}

}  // namespace
}  // namespace peregrine

#include "peregrine/kernels/cpu/matmul/gemm_ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/activation_quantization_bound.h"
#include "peregrine/kernels/cpu/matmul/ggml_unpack.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

constexpr DType kTypes[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K,
                            DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};

// Byte offsets of a block's f16 fields (d, and m / dmin where the format has one): every other
// byte is random, so every code, scale, min and sign pattern the format can hold occurs.
std::vector<std::size_t> f16_fields(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K: return {0, 2};
    case DType::kQ2_K: return {80, 82};
    case DType::kQ3_K: return {108};
    case DType::kQ6_K: return {208};
    default: return {0};  // Q5_0, IQ4_NL, IQ4_XS
  }
}

struct Weights {
  std::vector<std::uint8_t> storage;
  TensorView view;
};

// [out, in] random blocks stored `offset` bytes past an aligned address; f16 fields random in
// sign and over several octaves.
Weights random_weights(DType t, std::int64_t out, std::int64_t in, std::size_t offset, std::mt19937& rng) {
  const std::size_t block_bytes = dtype_block_bytes(t);
  const std::size_t n_blocks = static_cast<std::size_t>(out * in) / dtype_block_size(t);
  Weights w;
  w.storage.resize(offset + n_blocks * block_bytes);
  std::uniform_int_distribution<int> byte(0, 255), octave(-12, 0);
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  for (std::size_t b = 0; b < n_blocks; ++b) {
    std::uint8_t* block = w.storage.data() + offset + b * block_bytes;
    for (std::size_t j = 0; j < block_bytes; ++j) block[j] = static_cast<std::uint8_t>(byte(rng));
    for (std::size_t at : f16_fields(t)) {
      const std::uint16_t h = f32_to_f16(std::ldexp(mantissa(rng), octave(rng)) * (byte(rng) < 128 ? -1.0f : 1.0f));
      std::memcpy(block + at, &h, 2);
    }
  }
  w.view = TensorView{std::string("w"), t, {out, in}, w.storage.data() + offset, n_blocks * block_bytes, {}};
  return w;
}

using test::random_activations;

// Row lengths: whole super-groups for every format; the 32-value formats also partial ones.
std::vector<std::int64_t> row_lengths(DType t) {
  if (dtype_block_size(t) == 256) return {256, 768, 2048};
  return {32, 96, 256, 288, 896};
}

// The decoded form w = a·u + b is exactly what dequantize gives, up to one f32 rounding of each
// (a·u + b against ggml's own formula, e.g. Q6_K's d·scale·(q − 32)).
TEST(GemmGgml, UnpackedSuperGroupsEqualTheDecodedValues) {
  std::mt19937 rng(21);
  for (DType t : kTypes) {
    const Weights w = random_weights(t, 1, 2048, 0, rng);
    std::vector<float> ref(2048);
    dequantize(t, w.view.data, ref);
    const std::size_t group_bytes = super_group_bytes(t);
    for (int g = 0; g < 8; ++g) {
      UnpackedSuperGroup s;
      unpack_super_group(t, static_cast<const std::uint8_t*>(w.view.data) + g * group_bytes, 8, s);
      for (int i = 0; i < kSuperGroup; ++i) {
        const float v = s.a[i / 16] * static_cast<float>(s.u[i]) + s.b[i / 16];
        const float tol = 3e-7f * (std::fabs(s.a[i / 16]) * 255.0f + std::fabs(s.b[i / 16]));
        ASSERT_NEAR(v, ref[static_cast<std::size_t>(256 * g + i)], tol) << dtype_name(t) << " value " << 256 * g + i;
      }
    }
  }
}

// M = Σ_s |a_s·dx|·Σ|u·q| + |b_s|·|sum16_s|: the magnitudes of every term the kernels add.
double term_magnitude(const TensorView& w, const GgmlActivations& xa, std::int64_t row, std::int64_t token) {
  const std::size_t group_bytes = super_group_bytes(w.dtype);
  const std::int64_t groups = xa.ld / kSuperGroup;
  const auto* base = static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(row) * (w.nbytes / w.n_rows());
  double m = 0.0;
  for (std::int64_t g = 0; g < groups; ++g) {
    UnpackedSuperGroup s;
    const int blocks = static_cast<int>(std::min<std::int64_t>(8, (xa.in - g * kSuperGroup) / 32));
    unpack_super_group(w.dtype, base + g * group_bytes, blocks, s);
    for (int i = 0; i < kSuperGroup; ++i) {
      const std::size_t at = static_cast<std::size_t>(token * xa.ld + g * kSuperGroup + i);
      const float dx = xa.dx[at / 4];
      m += std::fabs(s.a[i / 16] * dx) * std::abs(s.u[i] * xa.q[at]);
    }
    for (int i = 0; i < 16; ++i) m += std::fabs(s.b[i] * xa.sum16[static_cast<std::size_t>(token * xa.ld / 16 + 16 * g + i)]);
  }
  return m;
}

// Activation blocks to test a format with: Q8_0's 32 always, Q8_K's 256 where rows are whole
// super-groups (the blocks matmul gives the K-quants and IQ4_XS, where decode sums each
// super-group in int32 with integer sub-block scales).
std::vector<std::int64_t> activation_blocks(std::int64_t in) {
  if (in % kActivationBlockQ8_K == 0) return {kActivationBlockQ8_0, kActivationBlockQ8_K};
  return {kActivationBlockQ8_0};
}

TEST(GemmGgml, ActivationBlocksAreGgmlsVecDotTypes) {
  for (DType t : kTypes) {
    const bool k_quant = dtype_block_size(t) == 256;
    EXPECT_EQ(ggml_activation_block(t), k_quant ? kActivationBlockQ8_K : kActivationBlockQ8_0) << dtype_name(t);
  }
}

// gemm_ggml (SIMD decoding, tiles, threads) against its scalar twin on the same activations:
// the same exact int32 dots, f32 sums in other orders. The twin's chain has in/16 + 3 roundings
// per term, the SIMD lanes fewer plus a 16-lane tree, so |simd − twin| <= 2·(in/16 + 8)·u·M.
// (The integer-scaled decode path sums Σ sc_s·dot_s exactly and rounds d·dx once: fewer.)
TEST(GemmGgml, MatchesScalarTwinUpToSummationOrder) {
  std::mt19937 rng(22);
  for (DType t : kTypes) {
    for (std::int64_t in : row_lengths(t)) {
      for (std::int64_t block : activation_blocks(in)) {
        for (std::int64_t out : {1, 5, 9, 50}) {  // 50 rows: a 32-row panel pair, a 16-row panel, 2 more rows
          const Weights w = random_weights(t, out, in, /*offset=*/1 + out % 3, rng);
          const double u = std::ldexp(1.0, -24), k = 2.0 * (static_cast<double>(in) / 16 + 8);
          for (std::int64_t n_tokens : {1, 2, 3, 4, 6, 7, 8, 9, 13, 17}) {  // AVX-512: GEMVs to 7 / 8; AVX2: tiles of 8 and tails
            const auto x = random_activations(n_tokens, in, rng);
            QuantizedActivations xq;
            quantize_activations_reference(x, n_tokens, in, xq, block);
            GgmlActivations xa;
            prepare_ggml_activations(xq, t, xa);
            std::vector<float> ref(static_cast<std::size_t>(n_tokens * out));
            gemm_ggml_reference(w.view, xa, ref);
            test::for_each_simd_target([&] {
              for (int threads : {1, 3}) {
                ThreadPool pool(threads);
                std::vector<float> y(ref.size(), NAN);
                gemm_ggml(w.view, xa, y, pool, /*min_parallel_macs=*/0);
                for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
                  for (std::int64_t o = 0; o < out; ++o) {
                    const auto i = static_cast<std::size_t>(tok * out + o);
                    ASSERT_NEAR(y[i], ref[i], k * u * term_magnitude(w.view, xa, o, tok))
                        << dtype_name(t) << " " << out << "x" << in << " block=" << block << " n_tokens=" << n_tokens
                        << " threads=" << threads << " token " << tok << " row " << o;
                  }
                }
              }
            });
          }
        }
      }
    }
  }
}

// matmul on these formats (activations quantized inside) against matmul_reference (exactly
// decoded weights, f32 activations, f64 sums): the activation rounding over the blocks
// ggml_activation_block gives, plus f32 summation.
TEST(GemmGgml, MatmulIsWithinActivationQuantizationErrorOfFloatReference) {
  std::mt19937 rng(23);
  for (DType t : kTypes) {
    const std::int64_t in = dtype_block_size(t) == 256 ? 512 : 288, out = 7;
    const Weights w = random_weights(t, out, in, 3, rng);
    std::vector<float> wf(static_cast<std::size_t>(out * in));
    dequantize(t, w.view.data, wf);
    for (std::int64_t n_tokens : {1, 5}) {
      const auto x = random_activations(n_tokens, in, rng);
      std::vector<float> ref(static_cast<std::size_t>(n_tokens * out)), y(ref.size());
      matmul_reference(w.view, x, n_tokens, ref);
      ThreadPool pool(2);
      matmul(w.view, x, n_tokens, y, pool);
      for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
        const std::span<const float> xr(&x[static_cast<std::size_t>(tok * in)], static_cast<std::size_t>(in));
        for (std::int64_t o = 0; o < out; ++o) {
          const std::span<const float> wr(&wf[static_cast<std::size_t>(o * in)], static_cast<std::size_t>(in));
          double m = 0.0;
          for (std::size_t i = 0; i < xr.size(); ++i) m += std::fabs(wr[i]) * (std::fabs(xr[i]) + 0.1);
          const auto block = static_cast<std::size_t>(ggml_activation_block(t));
          const double bound = test::activation_quantization_bound(wr, xr, block) + 4.0 * (in / 16 + 8) * std::ldexp(1.0, -24) * m;
          const auto i = static_cast<std::size_t>(tok * out + o);
          ASSERT_NEAR(y[i], ref[i], bound) << dtype_name(t) << " token " << tok << " row " << o;
        }
      }
    }
  }
}

}  // namespace
}  // namespace peregrine

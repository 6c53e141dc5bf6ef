#include "peregrine/kernels/cpu/matmul/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/activation_quantization_bound.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/nf4.h"
#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

void put_u16(std::vector<std::uint8_t>& buf, std::uint16_t v) {
  const auto at = buf.size();
  buf.resize(at + 2);
  std::memcpy(buf.data() + at, &v, 2);
}

// Encodes row-major f32 weights (rows of `in` values) in `t`'s GGUF layout (a small test-side
// quantizer: RTN with ggml's block scales; exactness does not matter, matmul is compared on the
// stored bytes); NF4 through quant/nf4.h's row encoder.
std::vector<std::uint8_t> encode(DType t, const std::vector<float>& w, std::int64_t in = 0) {
  std::vector<std::uint8_t> out;
  switch (t) {
    case DType::kNF4: {
      const std::size_t row_bytes = *dtype_row_bytes(t, static_cast<std::uint64_t>(in));
      out.resize(w.size() / static_cast<std::size_t>(in) * row_bytes);
      for (std::size_t r = 0; r * static_cast<std::size_t>(in) < w.size(); ++r) {
        nf4_encode_row(std::span<const float>(w).subspan(r * static_cast<std::size_t>(in), static_cast<std::size_t>(in)),
                       out.data() + r * row_bytes);
      }
      break;
    }
    case DType::kF32:
      out.resize(w.size() * 4);
      std::memcpy(out.data(), w.data(), out.size());
      break;
    case DType::kF16:
      for (float v : w) put_u16(out, f32_to_f16(v));
      break;
    case DType::kBF16:
      for (float v : w) put_u16(out, f32_to_bf16(v));
      break;
    case DType::kQ8_0:
      for (std::size_t b = 0; b < w.size(); b += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b + j]));
        const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        put_u16(out, f32_to_f16(d));
        for (int j = 0; j < 32; ++j) {
          out.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(std::lround(w[b + j] * id))));
        }
      }
      break;
    case DType::kQ4_0:
      for (std::size_t b = 0; b < w.size(); b += 32) {
        float max = 0.0f;  // signed value of largest magnitude (ggml quantize_row_q4_0)
        for (int j = 0; j < 32; ++j) {
          if (std::fabs(w[b + j]) > std::fabs(max)) max = w[b + j];
        }
        const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        put_u16(out, f32_to_f16(d));
        auto nib = [&](float v) { return std::min(15, static_cast<int>(v * id + 8.5f)); };
        for (int j = 0; j < 16; ++j) {
          out.push_back(static_cast<std::uint8_t>(nib(w[b + j]) | (nib(w[b + j + 16]) << 4)));
        }
      }
      break;
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kInt:  // row-scaled and group-wise formats: gemm_fp8_test, gemm_int*_test
    default:           // the other ggml block formats: gemm_ggml_test on random blocks
      ADD_FAILURE() << "no test encoder for " << dtype_name(t);
      break;
  }
  return out;
}

TensorView view(DType t, std::int64_t out, std::int64_t in, const std::vector<std::uint8_t>& bytes) {
  return TensorView{std::string("w"), t, {out, in}, bytes.data(), bytes.size()};
}

struct Shape {
  std::int64_t out, in;
};

void check_against_reference(DType t, Shape s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> wf(static_cast<std::size_t>(s.out * s.in));
  for (auto& v : wf) v = normal(rng);
  const auto bytes = encode(t, wf, s.in);
  ASSERT_EQ(bytes.size(), *dtype_row_bytes(t, static_cast<std::uint64_t>(s.in)) * static_cast<std::size_t>(s.out));
  const TensorView w = view(t, s.out, s.in, bytes);
  std::vector<float> wd(wf.size());  // the weights as stored, for the tolerance
  dequantize(t, bytes.data(), wd);

  for (std::int64_t n_tokens : {1, 3, 17}) {
    std::vector<float> x(static_cast<std::size_t>(n_tokens * s.in));
    for (auto& v : x) v = normal(rng);
    std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out));
    matmul_reference(w, x, n_tokens, ref);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(ref.size(), std::numeric_limits<float>::quiet_NaN());
      matmul(w, x, n_tokens, y, pool, /*min_parallel_macs=*/0);
      for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
        for (std::int64_t o = 0; o < s.out; ++o) {
          double mag = 0.0;  // Σ|w||x| bounds the accumulation error of a dot product
          for (std::int64_t i = 0; i < s.in; ++i) {
            mag += std::fabs(static_cast<double>(wd[static_cast<std::size_t>(o * s.in + i)]) *
                             x[static_cast<std::size_t>(tok * s.in + i)]);
          }
          // Q8_0/Q4_0 products quantize the activations to 8 bits (gemm_quant.h): add that error.
          const bool quantized = t == DType::kQ8_0 || t == DType::kQ4_0;
          const std::span<const float> wr(&wd[static_cast<std::size_t>(o * s.in)], static_cast<std::size_t>(s.in));
          const std::span<const float> xr(&x[static_cast<std::size_t>(tok * s.in)], static_cast<std::size_t>(s.in));
          const double act = quantized ? test::activation_quantization_bound(wr, xr) : 0.0;
          const auto idx = static_cast<std::size_t>(tok * s.out + o);
          ASSERT_NEAR(y[idx], ref[idx], 1e-5 * mag + act + 1e-30)
              << dtype_name(t) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens
              << " threads=" << threads << " token " << tok << " row " << o;
        }
      }
    }
  }
}

constexpr Shape kBlockShapes[] = {{1, 32}, {7, 64}, {33, 96}, {172, 64}};
constexpr Shape kOddShapes[] = {{1, 7}, {7, 33}, {33, 172}, {172, 7}, {3, 1}};

TEST(Matmul, MatchesReferenceForEveryDtype) {
  std::mt19937 rng(42);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    for (Shape s : kBlockShapes) check_against_reference(t, s, rng);
  }
}

// NF4 (gemm_nf4: the fused codebook-lookup GEMV for 1 and 3 tokens on AVX-512, rows decoded 64 at
// a time then the float GEMV / GEMM otherwise) against the scalar reference on every SIMD
// target, one row of 257 blocks included (two absmax groups per row).
TEST(Matmul, Nf4MatchesReference) {
  test::for_each_simd_target([] {
    std::mt19937 rng(45);
    for (Shape s : {Shape{1, 64}, Shape{7, 128}, Shape{70, 64}, Shape{3, 64 * 257}}) check_against_reference(DType::kNF4, s, rng);
  });
}

TEST(Matmul, ScalarDtypesHandleRowLengthsThatAreNotBlockMultiples) {
  std::mt19937 rng(43);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (Shape s : kOddShapes) check_against_reference(t, s, rng);
  }
}

TEST(Matmul, MisalignedF32WeightsAreReadSafely) {
  // safetensors data (and GGUF with alignment 1) may leave F32 rows off a 4-byte boundary;
  // the kernel must copy them rather than load misaligned floats (UBSan checks this).
  const std::vector<float> wf = {1, 2, 3, -1, 0, 0.5f};
  std::vector<std::uint8_t> bytes(1 + wf.size() * sizeof(float));
  std::memcpy(bytes.data() + 1, wf.data(), wf.size() * sizeof(float));
  const TensorView w{std::string("w"), DType::kF32, {2, 3}, bytes.data() + 1, wf.size() * sizeof(float)};
  const std::vector<float> x = {1, 1, 1, 2, -1, 4};
  std::vector<float> y(4);
  ThreadPool pool(2);
  matmul(w, x, 2, y, pool, /*min_parallel_macs=*/0);
  EXPECT_EQ(y, (std::vector<float>{6, -0.5f, 12, 0}));
}

TEST(Matmul, ReferenceOnHandComputedExample) {
  // W = [[1, 2, 3], [-1, 0, 0.5]], x = [[1, 1, 1], [2, -1, 4]]  →  y = [[6, -0.5], [12, 0]].
  const std::vector<float> wf = {1, 2, 3, -1, 0, 0.5f};
  const std::vector<float> x = {1, 1, 1, 2, -1, 4};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {  // all exactly representable
    const auto bytes = encode(t, wf);
    const TensorView w = view(t, 2, 3, bytes);
    std::vector<float> ref(4), y(4);
    matmul_reference(w, x, 2, ref);
    ThreadPool pool(2);
    matmul(w, x, 2, y, pool, /*min_parallel_macs=*/0);
    const std::vector<float> expected = {6, -0.5f, 12, 0};
    EXPECT_EQ(ref, expected) << dtype_name(t);
    EXPECT_EQ(y, expected) << dtype_name(t);
  }
}

TEST(Matmul, QuantizedWeightsApproximateFloatProduct) {
  // Sanity check of the test quantizer + decode path: Q8_0/Q4_0 results stay close to the f32
  // product (RTN error bound: d/2 per weight, d = amax/127 or amax/8).
  std::mt19937 rng(44);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t out = 5, in = 64;
  std::vector<float> wf(static_cast<std::size_t>(out * in)), x(static_cast<std::size_t>(in));
  for (auto& v : wf) v = normal(rng);
  for (auto& v : x) v = normal(rng);
  const auto wb32 = encode(DType::kF32, wf);
  std::vector<float> exact(static_cast<std::size_t>(out));
  matmul_reference(view(DType::kF32, out, in, wb32), x, 1, exact);
  for (auto [t, rel] : {std::pair{DType::kQ8_0, 0.02}, std::pair{DType::kQ4_0, 0.25}}) {
    const auto bytes = encode(t, wf);
    std::vector<float> y(static_cast<std::size_t>(out));
    ThreadPool pool(3);
    matmul(view(t, out, in, bytes), x, 1, y, pool);
    for (std::int64_t o = 0; o < out; ++o) {
      double mag = 0.0;
      for (std::int64_t i = 0; i < in; ++i) mag += std::fabs(wf[static_cast<std::size_t>(o * in + i)] * x[static_cast<std::size_t>(i)]);
      EXPECT_NEAR(y[static_cast<std::size_t>(o)], exact[static_cast<std::size_t>(o)], rel * mag) << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace peregrine

#include "peregrine/kernels/cpu/matmul/float_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "kernels/simd_targets.h"

namespace peregrine {
namespace {

constexpr DType kFloatDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr std::int64_t kIns[] = {1, 7, 17, 172, 257};  // 257 crosses gemm_float's 256-input block
constexpr std::int64_t kOuts[] = {1, 3, 33, 61};      // 61 crosses its 48-row yᵀ block

// `values` stored in dtype t (F16/BF16 rounded to nearest even), `offset` bytes into the
// buffer (to misalign them).
struct StoredWeights {
  std::vector<std::uint8_t> buffer;
  TensorView view;
};

StoredWeights store(DType t, std::int64_t out, std::int64_t in, const std::vector<float>& values,
                    std::size_t offset = 0) {
  const std::size_t width = t == DType::kF32 ? 4 : 2;
  StoredWeights w;
  w.buffer.resize(offset + values.size() * width);
  for (std::size_t e = 0; e < values.size(); ++e) {
    const std::uint16_t half = t == DType::kF16 ? f32_to_f16(values[e]) : f32_to_bf16(values[e]);
    std::memcpy(w.buffer.data() + offset + e * width,
                t == DType::kF32 ? static_cast<const void*>(&values[e]) : &half, width);
  }
  w.view = TensorView{"w", t, {out, in}, w.buffer.data() + offset, values.size() * width, {}};
  return w;
}

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

StoredWeights random_weights(DType t, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  return store(t, out, in, random_values(static_cast<std::size_t>(out * in), rng));
}

std::vector<float> random_tokens(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng) {
  return random_values(static_cast<std::size_t>(n_tokens * in), rng);
}

// Σ_i W[o, i] · x[t, i] and Σ_i |W[o, i] · x[t, i]| for every (t, o), in f64, over the
// stored weights.
struct ExactSums {
  std::vector<double> value, magnitude;
};

ExactSums exact_sums(const TensorView& w, const std::vector<float>& x, std::int64_t n_tokens) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> wd(static_cast<std::size_t>(out * in));
  dequantize(w.dtype, w.data, wd);
  ExactSums s{std::vector<double>(static_cast<std::size_t>(n_tokens * out), 0.0),
              std::vector<double>(static_cast<std::size_t>(n_tokens * out), 0.0)};
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t i = 0; i < in; ++i) {
        const double term = static_cast<double>(wd[static_cast<std::size_t>(o * in + i)]) * x[static_cast<std::size_t>(t * in + i)];
        s.value[static_cast<std::size_t>(t * out + o)] += term;
        s.magnitude[static_cast<std::size_t>(t * out + o)] += std::fabs(term);
      }
    }
  }
  return s;
}

// x as matmul multiplies W of dtype t by it: rounded to BF16 for BF16 weights (matmul.h).
std::vector<float> as_matmul_input(DType t, std::vector<float> x) {
  if (t == DType::kBF16) {
    for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
  }
  return x;
}

// Worst-case f32 summation error (Higham, "Accuracy and Stability of Numerical Algorithms",
// §4.2): a sum whose terms each pass through at most h rounded additions (FMA: the product is
// not rounded) is within γ_h·Σ|terms| of the exact sum, γ_h = h·u / (1 − h·u), u = 2⁻²⁴.
// The twin and gemm_float add sequentially (h = in); gemv_float adds per SIMD lane and then
// across lanes (h <= in/lanes + log2(lanes) + 1 <= in + 8 for up to 256 lanes). Two results
// within γ_h of the exact value are within 2·γ_h of each other; the f64 reference is exact
// to far below that.
double tolerance(std::int64_t in, double magnitude) {
  const double u = std::ldexp(1.0, -24), h = static_cast<double>(in + 8);
  return 2.0 * h * u / (1.0 - h * u) * magnitude;
}

using RowKernel = void (*)(const TensorView&, std::span<const float>, std::int64_t,
                           std::span<float>, std::int64_t, std::int64_t);

// Runs `kernel` on rows [row_begin, row_end) and checks them against the scalar twin and the
// exact f64 sums (the kernels take x as given, BF16 weights too), and that it left the other
// columns of y untouched.
void check_rows(RowKernel kernel, const TensorView& w, std::int64_t n_tokens,
                std::int64_t row_begin, std::int64_t row_end, std::mt19937& rng) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto x = random_tokens(n_tokens, in, rng);
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(static_cast<std::size_t>(n_tokens * out), sentinel), twin = y;
  kernel(w, x, n_tokens, y, row_begin, row_end);
  float_matmul_reference(w, x, n_tokens, twin, row_begin, row_end);
  const ExactSums exact = exact_sums(w, x, n_tokens);
  const std::vector<double>& mag = exact.magnitude;
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      const auto e = static_cast<std::size_t>(t * out + o);
      SCOPED_TRACE(std::string(dtype_name(w.dtype)) + " " + std::to_string(out) + "x" + std::to_string(in) +
                   " n_tokens=" + std::to_string(n_tokens) + " rows [" + std::to_string(row_begin) + ", " +
                   std::to_string(row_end) + ") token " + std::to_string(t) + " row " + std::to_string(o));
      if (o < row_begin || o >= row_end) {
        ASSERT_TRUE(std::isnan(y[e])) << "wrote outside its rows";
        continue;
      }
      ASSERT_LE(std::fabs(y[e] - twin[e]), tolerance(in, mag[e])) << y[e] << " vs twin " << twin[e];
      ASSERT_LE(std::fabs(y[e] - exact.value[e]), tolerance(in, mag[e])) << y[e] << " vs exact " << exact.value[e];
    }
  }
}

// Every dtype × odd shape × token count, on the whole matrix and on a row range that is not
// aligned to the kernel's tile.
void check_kernel(RowKernel kernel, std::initializer_list<std::int64_t> token_counts,
                  std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (DType t : kFloatDtypes) {
    for (std::int64_t in : kIns) {
      for (std::int64_t out : kOuts) {
        const auto w = random_weights(t, out, in, rng);
        for (std::int64_t n_tokens : token_counts) {
          check_rows(kernel, w.view, n_tokens, 0, out, rng);
          if (out > 2) check_rows(kernel, w.view, n_tokens, 1, out - 1, rng);
        }
      }
    }
  }
}

TEST(GemvFloat, MatchesScalarTwinAndReference) {
  test::for_each_simd_target([] { check_kernel(gemv_float, {1, 2, 3, 4, 5, 9}, 101); });
}

TEST(GemmFloat, MatchesScalarTwinAndReference) {
  // 1..16 tokens use the one-vector tail micro-kernel on AVX-512; 17, 31, 33, 40 mix full and
  // zero-padded panels.
  test::for_each_simd_target([] { check_kernel(gemm_float, {1, 8, 16, 17, 31, 33, 40}, 102); });
}

TEST(FloatMatmul, DispatchMatchesReferenceAcrossTheGemmThreshold) {
  std::mt19937 rng(103);
  for (DType t : kFloatDtypes) {
    const auto w = random_weights(t, 61, 172, rng);
    for (std::int64_t n_tokens = 1; n_tokens <= 40; ++n_tokens) {
      const auto x = random_tokens(n_tokens, 172, rng);
      std::vector<float> ref(static_cast<std::size_t>(n_tokens * 61));
      matmul_reference(w.view, x, n_tokens, ref);
      const auto mag = exact_sums(w.view, as_matmul_input(t, x), n_tokens).magnitude;
      for (int threads : {1, 3}) {
        for (std::int64_t min_parallel_macs : {std::int64_t{0}, kMinParallelMacs}) {
          ThreadPool pool(threads);
          std::vector<float> y(ref.size(), std::numeric_limits<float>::quiet_NaN());
          matmul(w.view, x, n_tokens, y, pool, min_parallel_macs);
          for (std::size_t e = 0; e < y.size(); ++e) {
            ASSERT_LE(std::fabs(y[e] - ref[e]), tolerance(172, mag[e]))
                << dtype_name(t) << " n_tokens=" << n_tokens << " threads=" << threads
                << " min_parallel_macs=" << min_parallel_macs << " element " << e;
          }
        }
      }
    }
  }
}

TEST(FloatMatmul, MisalignedWeightsGiveBitIdenticalResults) {
  // GGUF (alignment 1) and safetensors mappings may place rows at any byte: the kernels load
  // unaligned and must compute exactly what they compute on an aligned copy.
  std::mt19937 rng(104);
  for (DType t : kFloatDtypes) {
    const auto values = random_values(33 * 257, rng);
    const auto aligned = store(t, 33, 257, values);
    for (std::size_t offset : {1, 2, 3}) {
      const auto shifted = store(t, 33, 257, values, offset);
      for (std::int64_t n_tokens : {1, 3, 40}) {
        const auto x = random_tokens(n_tokens, 257, rng);
        test::for_each_simd_target([&] {
          for (RowKernel kernel : {gemv_float, gemm_float}) {
            std::vector<float> y_aligned(static_cast<std::size_t>(n_tokens * 33)), y_shifted(y_aligned.size());
            kernel(aligned.view, x, n_tokens, y_aligned, 0, 33);
            kernel(shifted.view, x, n_tokens, y_shifted, 0, 33);
            EXPECT_EQ(y_aligned, y_shifted) << dtype_name(t) << " offset " << offset << " n_tokens=" << n_tokens;
          }
        });
      }
    }
  }
}

TEST(FloatMatmul, ScalarTwinOnHandComputedExample) {
  // W = [[1, 2, 3], [-1, 0, 0.5]], x = [[1, 1, 1], [2, -1, 4]]  →  y = [[6, -0.5], [12, 0]];
  // all values exact in F16 and BF16.
  const std::vector<float> x = {1, 1, 1, 2, -1, 4};
  for (DType t : kFloatDtypes) {
    const auto w = store(t, 2, 3, {1, 2, 3, -1, 0, 0.5f});
    std::vector<float> y(4);
    float_matmul_reference(w.view, x, 2, y, 0, 2);
    EXPECT_EQ(y, (std::vector<float>{6, -0.5f, 12, 0})) << dtype_name(t);
  }
}

}  // namespace
}  // namespace peregrine

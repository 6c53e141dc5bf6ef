#include "peregrine/kernels/cpu/matmul/gemm_quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/activation_quantization_bound.h"
#include "kernels/simd_targets.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"
#include "peregrine/quant/unpack_int8.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

using test::random_activations;
using test::random_block_weights;
using test::term_magnitude;

struct Shape {
  std::int64_t out, in;
};
constexpr Shape kShapes[] = {{0, 64}, {1, 32}, {3, 64}, {33, 96}, {100, 2048 + 32}, {5, 8192 + 32}};
constexpr std::int64_t kTokenCounts[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 17, 31, 40};

// gemm_quant (SIMD tiles, threaded) against its scalar twin gemm_quant_reference on the same
// quantized activations. Both sum the same exact terms d_w·d_x·(int dot) in f32, in different
// orders: the twin blocks in sequence (k <= blocks + 2 roundings per term: d_w·d_x, ·dot, the
// running sum), the register tiles per lane over block pairs plus a 16-lane tree (k <= blocks/2
// + 7), the row panels (n_tokens >= 4) per row in block order (k <= blocks + 2). Shapes with 33
// and 100 rows run 32- and 16-row panels plus register-tile tails.
// With u = 2^-24 and γ_k <= 1.01·k·u, |simd - twin| <= (γ_{blocks+2} + γ_{blocks/2+7})·M
// <= 2·(blocks + 8)·u·M.
TEST(GemmQuant, MatchesScalarTwinUpToSummationOrder) {
  std::mt19937 rng(11);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    for (Shape s : kShapes) {
      const test::BlockWeights w = random_block_weights(t, s.out, s.in, /*offset=*/1 + s.out % 3, rng);
      const double u = std::ldexp(1.0, -24), k = 2.0 * (s.in / 32 + 8);
      for (std::int64_t n_tokens : kTokenCounts) {
        const auto x = random_activations(n_tokens, s.in, rng);
        QuantizedActivations xq;
        quantize_activations_reference(x, n_tokens, s.in, xq);
        std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out));
        gemm_quant_reference(w.view, xq, ref);
        test::for_each_simd_target([&] {
          for (int threads : {1, 3}) {
            ThreadPool pool(threads);
            std::vector<float> y(ref.size(), NAN);
            gemm_quant(w.view, xq, y, pool, /*min_parallel_macs=*/0);
            for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
              for (std::int64_t o = 0; o < s.out; ++o) {
                const auto i = static_cast<std::size_t>(tok * s.out + o);
                ASSERT_NEAR(y[i], ref[i], k * u * term_magnitude(w.view, xq, o, tok))
                    << "" << dtype_name(t) << " " << s.out << "x" << s.in
                    << " n_tokens=" << n_tokens << " threads=" << threads << " token " << tok
                    << " row " << o;
              }
            }
          }
        });
      }
    }
  }
}

// matmul on Q8_0/Q4_0 weights (activations quantized inside) against matmul_reference (f32
// activations, f64 sums): the difference is the activation quantization error
// (activation_quantization_bound) plus the f32 summation error of the integer path,
// 2·(blocks + 8)·u·M with M = Σ|w_i||x̂_i| <= Σ|w_i|·(|x_i| + amax_b/127) (that slack also covers
// the reference's single f64 → f32 rounding, <= u·|y| <= u·M).
TEST(GemmQuant, MatmulIsWithinActivationQuantizationErrorOfFloatReference) {
  std::mt19937 rng(12);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    for (Shape s : kShapes) {
      const test::BlockWeights w = random_block_weights(t, s.out, s.in, /*offset=*/3, rng);
      std::vector<float> wf(static_cast<std::size_t>(s.out * s.in));
      dequantize(t, w.view.data, wf);
      const double u = std::ldexp(1.0, -24), k = 2.0 * (s.in / 32 + 8);
      for (std::int64_t n_tokens : {1, 4, 40}) {
        const auto x = random_activations(n_tokens, s.in, rng);
        std::vector<float> ref(static_cast<std::size_t>(n_tokens * s.out)), y(ref.size());
        matmul_reference(w.view, x, n_tokens, ref);
        ThreadPool pool(2);
        matmul(w.view, x, n_tokens, y, pool);
        for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
          const std::span<const float> xr(&x[static_cast<std::size_t>(tok * s.in)], static_cast<std::size_t>(s.in));
          for (std::int64_t o = 0; o < s.out; ++o) {
            const std::span<const float> wr(&wf[static_cast<std::size_t>(o * s.in)], static_cast<std::size_t>(s.in));
            double m = 0.0;
            for (std::size_t b = 0; b < xr.size(); b += 32) {
              double amax = 0.0;
              for (std::size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(xr[i])));
              for (std::size_t i = b; i < b + 32; ++i) m += std::fabs(static_cast<double>(wr[i])) * (std::fabs(xr[i]) + amax / 127.0);
            }
            const auto i = static_cast<std::size_t>(tok * s.out + o);
            ASSERT_NEAR(y[i], ref[i], test::activation_quantization_bound(wr, xr) + k * u * m)
                << dtype_name(t) << " " << s.out << "x" << s.in << " n_tokens=" << n_tokens
                << " token " << tok << " row " << o;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace peregrine

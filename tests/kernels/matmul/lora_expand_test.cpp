// LoRA's expand product (kernels/cpu/matmul/lora_expand.h): the SIMD kernel against its scalar twin on
// every SIMD target, for F32 / F16 / BF16 Bᵀ at odd byte alignments (stored so that reading past
// the tensor faults) in the panel layout, ranks below and above a vector, row counts across the 4-row register
// blocks, scattered output rows, and column ranges with every kind of tail; columns outside the
// range stay untouched.
#include "peregrine/kernels/cpu/matmul/lora_expand.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "peregrine/quant/fp16.h"
#include "kernels/simd_targets.h"
#include "kernels/weight_fixtures.h"

namespace peregrine {
namespace {

// Bᵀ [rank, out] in the panel layout, every stored value (padding too) standard normal in `t`,
// in guarded bytes.
test::StoredWeights random_bt(DType t, std::int64_t rank, std::int64_t out, std::mt19937& rng) {
  const std::int64_t elements = lora_panel_elements(rank, out);
  if (t != DType::kF32) {
    test::StoredWeights w = test::random_half_weights(t, 1, elements, rng);
    w.view.shape = {rank, out};
    return w;
  }
  test::StoredWeights w{test::GuardedBytes(static_cast<std::size_t>(elements) * 4), {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < elements; ++i) {
    const float v = normal(rng);
    std::memcpy(w.bytes.data() + i * 4, &v, 4);
  }
  w.view.dtype = DType::kF32;
  w.view.shape = {rank, out};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  return w;
}

float stored(const TensorView& w, std::int64_t i) {
  const auto* u16 = static_cast<const std::uint16_t*>(w.data);
  if (w.dtype == DType::kF16) return f16_to_f32(u16[i]);
  if (w.dtype == DType::kBF16) return bf16_to_f32(u16[i]);
  float v;
  std::memcpy(&v, static_cast<const std::uint8_t*>(w.data) + i * 4, 4);
  return v;
}

struct Range {
  std::int64_t begin, end;
};

TEST(LoraExpand, SimdEqualsTheTwinOnEveryTarget) {
  std::mt19937 rng(7);
  constexpr std::int64_t kOut = 203;  // 3 blocks of 64, a vector and a scalar tail on AVX-512
  const Range ranges[] = {{0, kOut}, {0, 64}, {64, 192}, {5, 6}, {130, kOut}, {17, 17}};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (std::int64_t rank : {1, 4, 16, 19, 64}) {
      const test::StoredWeights bt = random_bt(dtype, rank, kOut, rng);
      for (std::int64_t m : {1, 2, 3, 4, 5, 9}) {
        const std::vector<float> t = test::random_activations(m, rank, rng);
        std::vector<std::int64_t> rows;
        for (std::int64_t j = 0; j < m; ++j) rows.push_back((j * 5 + 3) % 11);  // scattered, distinct for m <= 11
        const std::vector<float> y0 = test::random_activations(11, kOut, rng);
        for (const Range& r : ranges) {
          std::vector<float> want = y0;
          lora_expand_reference(bt.view, t, m, 0.75f, want, rows, r.begin, r.end);
          test::for_each_simd_target([&] {
            std::vector<float> got = y0;
            lora_expand(bt.view, t, m, 0.75f, got, rows, r.begin, r.end);
            for (std::size_t i = 0; i < got.size(); ++i) {
              const std::int64_t row = static_cast<std::int64_t>(i) / kOut, c = static_cast<std::int64_t>(i) % kOut;
              // Both are within γ_{rank+2}·(|y| + 0.75·Σ_k |t_k·b_kc|) of the exact value (an f32
              // sum of rank products, scaled, added to y); columns outside the range untouched.
              double bound = 0.0;
              if (c >= r.begin && c < r.end) {
                double terms = 0.0;
                for (std::int64_t j = 0; j < m; ++j) {
                  if (rows[static_cast<std::size_t>(j)] != row) continue;
                  for (std::int64_t k = 0; k < rank; ++k) terms += std::abs(t[static_cast<std::size_t>(j * rank + k)] * stored(bt.view, lora_panel_index(rank, k, c)));
                }
                bound = 2.0 * test::f32_gamma(static_cast<double>(rank + 2)) * (std::abs(y0[i]) + 0.75 * terms);
              }
              ASSERT_LE(std::abs(got[i] - want[i]), bound)
                  << dtype_name(dtype) << " rank " << rank << " m " << m << " cols [" << r.begin << ", " << r.end << ") index " << i;
            }
          });
        }
      }
    }
  }
}

TEST(LoraExpand, AddsScaleTimesTheProduct) {
  // Bᵀ = [[1, 2], [3, 4]] (rank 2, out 2; one panel, its rows kLoraExpandCols apart),
  // t = [10, 100]: t·Bᵀ = [310, 420]; y += 0.5 · that.
  std::vector<float> values(static_cast<std::size_t>(lora_panel_elements(2, 2)), 0.0f);
  values[0] = 1.0f;
  values[1] = 2.0f;
  values[kLoraExpandCols] = 3.0f;
  values[kLoraExpandCols + 1] = 4.0f;
  TensorView bt;
  bt.dtype = DType::kF32;
  bt.shape = {2, 2};
  bt.data = values.data();
  bt.nbytes = values.size() * sizeof(float);
  const std::vector<float> t = {10.0f, 100.0f};
  const std::int64_t rows[] = {1};
  std::vector<float> y = {7.0f, 7.0f, 1.0f, 2.0f};
  lora_expand(bt, t, 1, 0.5f, y, rows, 0, 2);
  EXPECT_EQ(y, (std::vector<float>{7.0f, 7.0f, 156.0f, 212.0f}));
}

}  // namespace
}  // namespace peregrine

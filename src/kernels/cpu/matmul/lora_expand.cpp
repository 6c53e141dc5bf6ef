#include "peregrine/kernels/cpu/matmul/lora_expand.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/lora_expand.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

// Rows of t sharing each loaded vector of Bᵀ.
constexpr std::size_t kExpandRows = 4;

// kVecs vectors of columns starting at column c, for kRows rows: acc = Σ_k t[j, k] · Bᵀ[k, c..],
// then y_j[c..] += scale · acc. w: Bᵀ[0, c] in its panel, whose rows are kLoraExpandCols apart.
template <std::size_t kVecs, std::size_t kRows, class WT>
HWY_INLINE void ExpandBlock(const WT* HWY_RESTRICT w, std::size_t rank, const float* HWY_RESTRICT t, float scale,
                            float* const* y, std::size_t c) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const std::size_t n = hn::Lanes(d);
  constexpr auto kStride = static_cast<std::size_t>(kLoraExpandCols);
  V acc[kRows][kVecs];
  for (std::size_t j = 0; j < kRows; ++j) {
    for (std::size_t v = 0; v < kVecs; ++v) acc[j][v] = hn::Zero(d);
  }
  for (std::size_t k = 0; k < rank; ++k) {
    V b[kVecs];
    for (std::size_t v = 0; v < kVecs; ++v) b[v] = LoadAsF32(d, w + k * kStride + v * n);
    for (std::size_t j = 0; j < kRows; ++j) {
      const V tk = hn::Set(d, t[j * rank + k]);
      for (std::size_t v = 0; v < kVecs; ++v) acc[j][v] = hn::MulAdd(b[v], tk, acc[j][v]);
    }
  }
  const V s = hn::Set(d, scale);
  for (std::size_t j = 0; j < kRows; ++j) {
    for (std::size_t v = 0; v < kVecs; ++v) {
      float* p = y[j] + c + v * n;
      hn::StoreU(hn::MulAdd(acc[j][v], s, hn::LoadU(d, p)), d, p);
    }
  }
}

// Columns [c0, c1) for kRows rows, panel by panel: blocks of 4 vectors, then single vectors,
// then scalars (a panel is a whole number of 4-vector blocks on every target).
template <std::size_t kRows, class WT>
HWY_INLINE void ExpandRows(const WT* bt, std::size_t rank, const float* t, float scale, float* const* y,
                           std::size_t c0, std::size_t c1) {
  const std::size_t n = hn::Lanes(hn::ScalableTag<float>());
  constexpr auto kCols = static_cast<std::size_t>(kLoraExpandCols);
  for (std::size_t c = c0; c < c1;) {
    const std::size_t panel = c / kCols, end = std::min(c1, (panel + 1) * kCols);
    const WT* w = bt + panel * rank * kCols - panel * kCols;  // + c: Bᵀ[0, c] in its panel
    for (; c + 4 * n <= end; c += 4 * n) ExpandBlock<4, kRows>(w + c, rank, t, scale, y, c);
    for (; c + n <= end; c += n) ExpandBlock<1, kRows>(w + c, rank, t, scale, y, c);
    for (; c < end; ++c) {
      for (std::size_t j = 0; j < kRows; ++j) {
        float acc = 0.0f;
        for (std::size_t k = 0; k < rank; ++k) acc += t[j * rank + k] * ScalarAsF32(w + c + k * kCols);
        y[j][c] += scale * acc;
      }
    }
  }
}

void LoraExpand(const TensorView& bt, const float* t, std::int64_t m, float scale, float* y,
                const std::int64_t* rows, std::int64_t col_begin, std::int64_t col_end) {
  const auto rank = static_cast<std::size_t>(bt.shape[0]), out = static_cast<std::size_t>(bt.shape[1]);
  WithWeightType(bt.dtype, [&](auto tag) {
    using WT = decltype(tag);
    const WT* w = static_cast<const WT*>(bt.data);
    const auto c0 = static_cast<std::size_t>(col_begin), c1 = static_cast<std::size_t>(col_end);
    const auto rows_total = static_cast<std::size_t>(m);
    for (std::size_t j = 0; j < rows_total; j += kExpandRows) {
      float* yj[kExpandRows];
      const std::size_t mb = std::min(kExpandRows, rows_total - j);
      for (std::size_t i = 0; i < mb; ++i) yj[i] = y + static_cast<std::size_t>(rows[j + i]) * out;
      const float* tj = t + j * rank;
      switch (mb) {
        case 1: ExpandRows<1>(w, rank, tj, scale, yj, c0, c1); break;
        case 2: ExpandRows<2>(w, rank, tj, scale, yj, c0, c1); break;
        case 3: ExpandRows<3>(w, rank, tj, scale, yj, c0, c1); break;
        default: ExpandRows<4>(w, rank, tj, scale, yj, c0, c1); break;
      }
    }
  });
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "peregrine/quant/fp16.h"

namespace peregrine {

HWY_EXPORT(LoraExpand);

void lora_expand(const TensorView& bt, std::span<const float> t, std::int64_t m, float scale, std::span<float> y,
                 std::span<const std::int64_t> rows, std::int64_t col_begin, std::int64_t col_end) {
  HWY_DYNAMIC_DISPATCH(LoraExpand)(bt, t.data(), m, scale, y.data(), rows.data(), col_begin, col_end);
}

namespace {
float stored_value(const TensorView& w, std::int64_t i) {
  switch (w.dtype) {
    case DType::kF16: return f16_to_f32(static_cast<const std::uint16_t*>(w.data)[i]);
    case DType::kBF16: return bf16_to_f32(static_cast<const std::uint16_t*>(w.data)[i]);
    default: return static_cast<const float*>(w.data)[i];
  }
}
}  // namespace

void lora_expand_reference(const TensorView& bt, std::span<const float> t, std::int64_t m, float scale,
                           std::span<float> y, std::span<const std::int64_t> rows, std::int64_t col_begin,
                           std::int64_t col_end) {
  const std::int64_t rank = bt.shape[0], out = bt.shape[1];
  for (std::int64_t j = 0; j < m; ++j) {
    for (std::int64_t c = col_begin; c < col_end; ++c) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < rank; ++k) acc += t[static_cast<std::size_t>(j * rank + k)] * stored_value(bt, lora_panel_index(rank, k, c));
      y[static_cast<std::size_t>(rows[static_cast<std::size_t>(j)] * out + c)] += scale * acc;
    }
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE

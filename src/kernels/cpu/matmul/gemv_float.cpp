#include "peregrine/kernels/cpu/matmul/gemv_float.h"

#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemv_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/float_weight_load-inl.h"
#include "kernels/cpu/matmul/gemv_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

template <class WT>
void GemvRows(const WT* w, std::size_t in, const float* x, std::size_t n_tokens, float* y,
              std::size_t out, std::size_t row_begin, std::size_t row_end) {
  constexpr std::size_t kRows = static_cast<std::size_t>(kGemvRows);
  const std::size_t n = hn::Lanes(hn::ScalableTag<float>()), ldx = (in + n - 1) / n * n;
  const float* xs = StageTokens(x, n_tokens, in, ldx);
  std::size_t o = row_begin;
  for (; o + kRows <= row_end; o += kRows) {
    RowBlock<kRows>(WeightRows<WT, true>{w + o * in, in}, in, xs, ldx, n_tokens, y + o, out);
  }
  for (; o < row_end; ++o) RowBlock<1>(WeightRows<WT, true>{w + o * in, in}, in, xs, ldx, n_tokens, y + o, out);
}

void GemvFloat(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
               std::int64_t row_begin, std::int64_t row_end) {
  WithWeightType(w.dtype, [&](auto tag) {
    using WT = decltype(tag);
    GemvRows(static_cast<const WT*>(w.data), static_cast<std::size_t>(w.row_length()), x,
             static_cast<std::size_t>(n_tokens), y, static_cast<std::size_t>(w.n_rows()),
             static_cast<std::size_t>(row_begin), static_cast<std::size_t>(row_end));
  });
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(GemvFloat);

void gemv_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                std::span<float> y, std::int64_t row_begin, std::int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(GemvFloat)(w, x.data(), n_tokens, y.data(), row_begin, row_end);
}

}  // namespace peregrine
#endif  // HWY_ONCE

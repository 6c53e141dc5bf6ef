#include "peregrine/kernels/cpu/matmul/gemm_float.h"

#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/matmul/float_weight_load-inl.h"
#include "kernels/cpu/matmul/gemm_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

// F32 / F16 / BF16 rows (row stride `in`) widened to f32: the GEMM's WeightSource.
template <class WT>
struct FloatWeights {
  const WT* w;
  std::size_t in;

  void PackRow(std::size_t row, std::size_t k0, std::size_t kc, float* HWY_RESTRICT dst) const {
    const hn::ScalableTag<float> d;
    const std::size_t n = hn::Lanes(d);
    const WT* src = w + row * in + k0;
    std::size_t i = 0;
    for (; i + n <= kc; i += n) hn::Store(LoadAsF32(d, src + i), d, dst + i);
    for (; i < kc; ++i) dst[i] = ScalarAsF32(src + i);
  }
  void PrefetchRow(std::size_t row, std::size_t k0, std::size_t kc) const {
    PrefetchBytes(w + row * in + k0, kc * sizeof(WT));
  }
};

void GemmFloat(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
               std::int64_t row_begin, std::int64_t row_end) {
  WithWeightType(w.dtype, [&](auto tag) {
    using WT = decltype(tag);
    const auto in = static_cast<std::size_t>(w.row_length());
    GemmRows(FloatWeights<WT>{static_cast<const WT*>(w.data), in}, in, x,
             static_cast<std::size_t>(n_tokens), y, static_cast<std::size_t>(w.n_rows()),
             static_cast<std::size_t>(row_begin), static_cast<std::size_t>(row_end));
  });
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(GemmFloat);

void gemm_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                std::span<float> y, std::int64_t row_begin, std::int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(GemmFloat)(w, x.data(), n_tokens, y.data(), row_begin, row_end);
}

}  // namespace peregrine
#endif  // HWY_ONCE

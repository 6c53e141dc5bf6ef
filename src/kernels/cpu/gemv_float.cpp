#include "peregrine/kernels/cpu/gemv_float.h"

#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemv_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

// Tokens that share one weight load (kGemvRows × kGemvTokens accumulators in registers).
constexpr std::size_t kGemvTokens = 4;
constexpr std::size_t kMaxLanes = hn::MaxLanes(hn::ScalableTag<float>());

// kRows weight rows (row stride `in`) times kTokens token rows of x (stride `in`): writes
// y[t * out + r]. The last in % Lanes inputs go through zero-padded f32 copies.
template <std::size_t kRows, std::size_t kTokens, class WT>
HWY_INLINE void DotBlock(const WT* HWY_RESTRICT w, std::size_t in, const float* HWY_RESTRICT x,
                         float* HWY_RESTRICT y, std::size_t out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const std::size_t n = hn::Lanes(d);
  V acc[kRows][kTokens];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t t = 0; t < kTokens; ++t) acc[r][t] = hn::Zero(d);
  }
  auto step = [&](auto load_w, auto load_x) {
    V xv[kTokens];
    for (std::size_t t = 0; t < kTokens; ++t) xv[t] = load_x(t);
    for (std::size_t r = 0; r < kRows; ++r) {
      const V wv = load_w(r);
      for (std::size_t t = 0; t < kTokens; ++t) acc[r][t] = hn::MulAdd(wv, xv[t], acc[r][t]);
    }
  };
  // The next kRows rows follow these contiguously: prefetch them at the rate this block is
  // consumed, so that the stream continues across the 4 KiB pages the hardware prefetcher
  // stops at.
  const char* next_block = reinterpret_cast<const char*>(w + kRows * in);
  const std::size_t step_bytes = kRows * n * sizeof(WT);
  std::size_t i = 0;
  for (; i + n <= in; i += n) {
    for (std::size_t b = 0; b < step_bytes; b += 64) hwy::Prefetch(next_block + i * kRows * sizeof(WT) + b);
    step([&](std::size_t r) { return LoadAsF32(d, w + r * in + i); },
         [&](std::size_t t) { return hn::LoadU(d, x + t * in + i); });
  }
  if (i < in) {
    HWY_ALIGN float wt[kRows][kMaxLanes] = {};
    HWY_ALIGN float xt[kTokens][kMaxLanes] = {};
    for (std::size_t j = i; j < in; ++j) {
      for (std::size_t r = 0; r < kRows; ++r) wt[r][j - i] = ScalarAsF32(w + r * in + j);
      for (std::size_t t = 0; t < kTokens; ++t) xt[t][j - i] = x[t * in + j];
    }
    step([&](std::size_t r) { return hn::Load(d, wt[r]); },
         [&](std::size_t t) { return hn::Load(d, xt[t]); });
  }
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t t = 0; t < kTokens; ++t) {
      y[t * out + r] = hn::GetLane(hn::SumOfLanes(d, acc[r][t]));
    }
  }
}

// kRows weight rows times all n_tokens tokens, kGemvTokens at a time (the rows stay in L1/L2
// between token groups).
template <std::size_t kRows, class WT>
HWY_INLINE void RowBlock(const WT* w, std::size_t in, const float* x, std::size_t n_tokens,
                         float* y, std::size_t out) {
  std::size_t t = 0;
  for (; t + kGemvTokens <= n_tokens; t += kGemvTokens) {
    DotBlock<kRows, kGemvTokens>(w, in, x + t * in, y + t * out, out);
  }
  switch (n_tokens - t) {
    case 1: return DotBlock<kRows, 1>(w, in, x + t * in, y + t * out, out);
    case 2: return DotBlock<kRows, 2>(w, in, x + t * in, y + t * out, out);
    case 3: return DotBlock<kRows, 3>(w, in, x + t * in, y + t * out, out);
    default: return;
  }
}

template <class WT>
void GemvRows(const WT* w, std::size_t in, const float* x, std::size_t n_tokens, float* y,
              std::size_t out, std::size_t row_begin, std::size_t row_end) {
  constexpr std::size_t kRows = static_cast<std::size_t>(kGemvRows);
  std::size_t o = row_begin;
  for (; o + kRows <= row_end; o += kRows) RowBlock<kRows>(w + o * in, in, x, n_tokens, y + o, out);
  for (; o < row_end; ++o) RowBlock<1>(w + o * in, in, x, n_tokens, y + o, out);
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

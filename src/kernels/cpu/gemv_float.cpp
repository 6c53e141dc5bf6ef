#include "peregrine/kernels/cpu/gemv_float.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <hwy/aligned_allocator.h>

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

// x copied to a vector-aligned per-thread buffer, rows ldx >= in apart and zero-padded to
// ldx: caller buffers are often only 16-byte aligned, and every misaligned full-vector load
// splits across two cache lines (it halved multi-token GEMV throughput).
const float* StageTokens(const float* x, std::size_t n_tokens, std::size_t in, std::size_t ldx) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local std::size_t capacity = 0;
  if (n_tokens * ldx > capacity) {
    capacity = n_tokens * ldx;
    buffer = hwy::AllocateAligned<float>(capacity);
  }
  for (std::size_t t = 0; t < n_tokens; ++t) {
    std::copy(x + t * in, x + t * in + in, buffer.get() + t * ldx);
    std::fill(buffer.get() + t * ldx + in, buffer.get() + (t + 1) * ldx, 0.0f);
  }
  return buffer.get();
}

// kRows weight rows (row stride `in`) times kTokens staged token rows (stride ldx): writes
// y[t * out + r]. The last in % Lanes weights go through a zero-padded f32 copy.
template <std::size_t kRows, std::size_t kTokens, class WT>
HWY_INLINE void DotBlock(const WT* HWY_RESTRICT w, std::size_t in, const float* HWY_RESTRICT x,
                         std::size_t ldx, float* HWY_RESTRICT y, std::size_t out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const std::size_t n = hn::Lanes(d);
  V acc[kRows][kTokens];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t t = 0; t < kTokens; ++t) acc[r][t] = hn::Zero(d);
  }
  auto step = [&](std::size_t i, auto load_w) {
    V xv[kTokens];
    for (std::size_t t = 0; t < kTokens; ++t) xv[t] = hn::Load(d, x + t * ldx + i);
    for (std::size_t r = 0; r < kRows; ++r) {
      const V wv = load_w(r);
      for (std::size_t t = 0; t < kTokens; ++t) acc[r][t] = hn::MulAdd(wv, xv[t], acc[r][t]);
    }
  };
  // The next kRows rows follow these contiguously: prefetch them at the rate this block is
  // consumed, so that the stream continues across the 4 KiB pages the hardware prefetcher
  // stops at. (Integer addresses: past the matrix end they are hints, never dereferenced.)
  const std::uintptr_t next_block = reinterpret_cast<std::uintptr_t>(w + kRows * in);
  const std::size_t step_bytes = kRows * n * sizeof(WT);
  std::size_t i = 0;
  for (; i + n <= in; i += n) {
    for (std::size_t b = 0; b < step_bytes; b += 64) {
      hwy::Prefetch(reinterpret_cast<const char*>(next_block + i * kRows * sizeof(WT) + b));
    }
    step(i, [&](std::size_t r) { return LoadAsF32(d, w + r * in + i); });
  }
  if (i < in) {
    HWY_ALIGN float wt[kRows][kMaxLanes] = {};
    for (std::size_t r = 0; r < kRows; ++r) {
      for (std::size_t j = i; j < in; ++j) wt[r][j - i] = ScalarAsF32(w + r * in + j);
    }
    step(i, [&](std::size_t r) { return hn::Load(d, wt[r]); });
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
HWY_INLINE void RowBlock(const WT* w, std::size_t in, const float* x, std::size_t ldx,
                         std::size_t n_tokens, float* y, std::size_t out) {
  std::size_t t = 0;
  for (; t + kGemvTokens <= n_tokens; t += kGemvTokens) {
    DotBlock<kRows, kGemvTokens>(w, in, x + t * ldx, ldx, y + t * out, out);
  }
  switch (n_tokens - t) {
    case 1: return DotBlock<kRows, 1>(w, in, x + t * ldx, ldx, y + t * out, out);
    case 2: return DotBlock<kRows, 2>(w, in, x + t * ldx, ldx, y + t * out, out);
    case 3: return DotBlock<kRows, 3>(w, in, x + t * ldx, ldx, y + t * out, out);
    default: return;
  }
}

template <class WT>
void GemvRows(const WT* w, std::size_t in, const float* x, std::size_t n_tokens, float* y,
              std::size_t out, std::size_t row_begin, std::size_t row_end) {
  constexpr std::size_t kRows = static_cast<std::size_t>(kGemvRows);
  const std::size_t n = hn::Lanes(hn::ScalableTag<float>()), ldx = (in + n - 1) / n * n;
  const float* xs = StageTokens(x, n_tokens, in, ldx);
  std::size_t o = row_begin;
  for (; o + kRows <= row_end; o += kRows) RowBlock<kRows>(w + o * in, in, xs, ldx, n_tokens, y + o, out);
  for (; o < row_end; ++o) RowBlock<1>(w + o * in, in, xs, ldx, n_tokens, y + o, out);
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

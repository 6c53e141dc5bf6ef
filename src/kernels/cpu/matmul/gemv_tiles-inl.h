// Per-target register tiles of the decode GEMV over f32-convertible weight rows, shared by
// gemv_float (F32/F16/BF16 rows read in place) and the multi-token paths of gemm_int / gemm_fp8
// (rows decoded once into an f32 buffer, then reused for every token).
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_GEMV_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_GEMV_TILES_INL_H_
#undef PEREGRINE_KERNELS_CPU_GEMV_TILES_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_GEMV_TILES_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "kernels/cpu/matmul/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Tokens that share one weight load (kRows × kGemvTokens accumulators in registers).
constexpr std::size_t kGemvTokens = 4;
constexpr std::size_t kMaxLanes = hn::MaxLanes(hn::ScalableTag<float>());

// A vector-aligned per-thread buffer of at least n floats (kept between calls).
inline float* TokenBuffer(std::size_t n) {
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local std::size_t capacity = 0;
  if (n > capacity) {
    capacity = n;
    buffer = hwy::AllocateAligned<float>(capacity);
  }
  return buffer.get();
}

// x copied to TokenBuffer, rows ldx >= in apart and zero-padded to ldx: caller buffers are
// often only 16-byte aligned, and every misaligned full-vector load splits across two cache
// lines (it halved multi-token GEMV throughput).
inline const float* StageTokens(const float* x, std::size_t n_tokens, std::size_t in, std::size_t ldx) {
  float* xs = TokenBuffer(n_tokens * ldx);
  for (std::size_t t = 0; t < n_tokens; ++t) {
    std::copy(x + t * in, x + t * in + in, xs + t * ldx);
    std::fill(xs + t * ldx + in, xs + (t + 1) * ldx, 0.0f);
  }
  return xs;
}

// Where DotBlock's weight rows come from: rows `stride` elements apart; kStream: they are
// read from memory once (prefetch the next kRows rows, which follow contiguously), else they
// sit in a cache-resident buffer.
template <class WT, bool kStream>
struct WeightRows {
  const WT* w;
  std::size_t stride;
};

// kRows weight rows times kTokens staged token rows (stride ldx): writes y[t * out + r] =
// Σ_{i < in} W[r][i] · x[t][i]. The last in % Lanes weights go through a zero-padded f32 copy.
template <std::size_t kRows, std::size_t kTokens, class WT, bool kStream>
HWY_INLINE void DotBlock(WeightRows<WT, kStream> rows, std::size_t in, const float* HWY_RESTRICT x,
                         std::size_t ldx, float* HWY_RESTRICT y, std::size_t out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const std::size_t n = hn::Lanes(d);
  const WT* HWY_RESTRICT w = rows.w;
  const std::size_t stride = rows.stride;
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
  // Streamed rows: the next kRows rows follow these contiguously: prefetch them at the rate
  // this block is consumed, so that the stream continues across the 4 KiB pages the hardware
  // prefetcher stops at. Into L2, not L1 (prefetcht1, GCC/Clang locality 2): the distance is a
  // whole block, kRows rows (44 KiB of TinyLlama's F16 ffn_down rows of 5632), which beside the
  // staged x overflows L1 and evicted the lines before their use; with t1, same run, alternated
  // 3 times, TinyLlama F16 tg32 went from 14.9-16.1 to 18.5-19.0 t/s and ffn_down from 26-28 to
  // 39-40 GB/s. (Integer addresses: past the matrix end they are hints, never dereferenced.)
  const std::uintptr_t next_block = reinterpret_cast<std::uintptr_t>(w + kRows * stride);
  const std::size_t step_bytes = kRows * n * sizeof(WT);
  std::size_t i = 0;
  for (; i + n <= in; i += n) {
    if constexpr (kStream) {
      for (std::size_t b = 0; b < step_bytes; b += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(next_block + i * kRows * sizeof(WT) + b), 0, 2);
      }
    }
    step(i, [&](std::size_t r) { return LoadAsF32(d, w + r * stride + i); });
  }
  if (i < in) {
    HWY_ALIGN float wt[kRows][kMaxLanes] = {};
    for (std::size_t r = 0; r < kRows; ++r) {
      for (std::size_t j = i; j < in; ++j) wt[r][j - i] = ScalarAsF32(w + r * stride + j);
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
template <std::size_t kRows, class WT, bool kStream>
HWY_INLINE void RowBlock(WeightRows<WT, kStream> rows, std::size_t in, const float* x, std::size_t ldx,
                         std::size_t n_tokens, float* y, std::size_t out) {
  std::size_t t = 0;
  for (; t + kGemvTokens <= n_tokens; t += kGemvTokens) {
    DotBlock<kRows, kGemvTokens>(rows, in, x + t * ldx, ldx, y + t * out, out);
  }
  switch (n_tokens - t) {
    case 1: return DotBlock<kRows, 1>(rows, in, x + t * ldx, ldx, y + t * out, out);
    case 2: return DotBlock<kRows, 2>(rows, in, x + t * ldx, ldx, y + t * out, out);
    case 3: return DotBlock<kRows, 3>(rows, in, x + t * ldx, ldx, y + t * out, out);
    default: return;
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

// Per-target y = x · Wᵀ over weight rows that a RowDecoder turns into f32 vectors on the fly
// (gemm_int: kInt codes; gemm_fp8: FP8 bytes). The activations are first staged per token in
// the decoder's slot order (the order its unpacking produces values in), zero-padded to whole
// units; then, as matmul_float's paths:
//   1 token: the decoder's fused dot product per row (weights streamed once, decoded in
//     registers; decode is memory-bound);
//   2 .. 4 tokens (speculative verification): each decoded unit multiplied with every token in
//     registers;
//   5 .. kGemmMinTokens−1 tokens: kGemvRows rows at a time decoded once into an L1-resident
//     f32 buffer, then gemv_tiles' register tiles (kGemvRows rows × 4 tokens) reuse them for
//     every token;
//   kGemmMinTokens+ tokens: the packed GEMM (gemm_tiles-inl.h), whose weight blocks the
//     decoder fills.
//
// A RowDecoder has `D`, `V`, kUnit (values per step, a multiple of Lanes(D) dividing
// kBlockInputs), kVectors = kUnit / Lanes, data() and row_bytes() (rows are contiguous), and:
//   Stage(x, dst): one token's row of x in slot order, dst[u + s] = x[u + value of slot s],
//     zero past the row, for every unit u;
//   Dot(row, xs, next): Σ_i W[row][i]·x[i] for a staged xs, prefetching the bytes at `next`
//     (the next row) as the row is read;
//   ForEachUnit(row, begin, end, fn) (begin a multiple of kUnit): fn(u, const V (&w)[kVectors])
//     for u = begin, begin + kUnit, … < end with the f32 weights of the unit's slots (0 past the
//     row length).
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_DECODED_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_DECODED_MATMUL_INL_H_
#undef PEREGRINE_KERNELS_CPU_DECODED_MATMUL_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_DECODED_MATMUL_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/matmul/gemm_tiles-inl.h"
#include "kernels/cpu/matmul/gemv_tiles-inl.h"
#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, end − begin) = the weights of slots [begin, end) of row `row` (begin a multiple of
// kUnit); whole units are stored, so dst needs room up to the next multiple of kUnit.
// dst: vector-aligned.
template <class Decoder>
HWY_INLINE void DecodeRow(const Decoder& dec, std::size_t row, std::size_t begin, std::size_t end,
                          float* HWY_RESTRICT dst) {
  const typename Decoder::D d;
  const std::size_t n = hn::Lanes(d);
  dec.ForEachUnit(row, begin, end, [&](std::size_t u, const typename Decoder::V (&w)[Decoder::kVectors]) {
    for (std::size_t j = 0; j < Decoder::kVectors; ++j) hn::Store(w[j], d, dst + (u - begin) + j * n);
  });
}

// The GEMM's WeightSource (gemm_tiles-inl.h) for a RowDecoder, over the staged (slot-order,
// padded) input width.
template <class Decoder>
struct DecodedWeights {
  const Decoder* dec;
  std::size_t in;

  void PackRow(std::size_t row, std::size_t k0, std::size_t kc, float* HWY_RESTRICT dst) const {
    DecodeRow(*dec, row, k0, k0 + kc, dst);
  }
  // The row's bytes in proportion to its values (a header of scales comes first).
  void PrefetchRow(std::size_t row, std::size_t k0, std::size_t kc) const {
    const std::size_t rb = dec->row_bytes();
    PrefetchBytes(dec->data() + row * rb + k0 * rb / in, kc * rb / in + 64);
  }
};

// 2 .. kGemvTokens tokens (xs: staged rows ldx apart): each unit of a row is decoded once in
// registers and multiplied with every token; the next row's bytes are prefetched at the rate
// this row is read.
template <std::size_t kTokens, class Decoder>
void DecodedGemvFew(const Decoder& dec, const float* HWY_RESTRICT xs, std::size_t ldx, float* HWY_RESTRICT y,
                    std::size_t out, std::size_t row_begin, std::size_t row_end) {
  const typename Decoder::D d;
  using V = typename Decoder::V;
  const std::size_t n = hn::Lanes(d), rb = dec.row_bytes();
  const std::size_t unit_bytes = std::max<std::size_t>(1, rb * Decoder::kUnit / ldx);  // ≈ bytes per unit
  for (std::size_t o = row_begin; o < row_end; ++o) {
    std::uintptr_t next = reinterpret_cast<std::uintptr_t>(dec.data()) + (o + 1) * rb;  // a hint only
    V acc[kTokens][Decoder::kVectors];
    for (std::size_t t = 0; t < kTokens; ++t) {
      for (std::size_t j = 0; j < Decoder::kVectors; ++j) acc[t][j] = hn::Zero(d);
    }
    dec.ForEachUnit(o, 0, ldx, [&](std::size_t u, const V (&w)[Decoder::kVectors]) {
      hwy::Prefetch(reinterpret_cast<const char*>(next));
      next += unit_bytes;
      for (std::size_t t = 0; t < kTokens; ++t) {
        for (std::size_t j = 0; j < Decoder::kVectors; ++j) {
          acc[t][j] = hn::MulAdd(w[j], hn::Load(d, xs + t * ldx + u + j * n), acc[t][j]);
        }
      }
    });
    for (std::size_t t = 0; t < kTokens; ++t) {
      for (std::size_t j = 1; j < Decoder::kVectors; ++j) acc[t][0] = hn::Add(acc[t][0], acc[t][j]);
      y[t * out + o] = hn::GetLane(hn::SumOfLanes(d, acc[t][0]));
    }
  }
}

// kGemvTokens+1 .. kGemmMinTokens−1 tokens (xs: n_tokens staged rows ldx apart): kGemvRows rows at a time are decoded once
// into a per-thread buffer and multiplied with every token; the next block's rows are
// prefetched meanwhile (the hardware prefetcher stops at 4 KiB pages).
template <class Decoder>
void DecodedGemvTokens(const Decoder& dec, const float* xs, std::size_t ldx, std::size_t n_tokens,
                       float* y, std::size_t out, std::size_t row_begin, std::size_t row_end) {
  constexpr std::size_t kRows = static_cast<std::size_t>(kGemvRows);
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local std::size_t capacity = 0;
  if (kRows * ldx > capacity) {
    capacity = kRows * ldx;
    buffer = hwy::AllocateAligned<float>(capacity);
  }
  float* wb = buffer.get();
  const std::size_t rb = dec.row_bytes();
  for (std::size_t o = row_begin; o < row_end; o += kRows) {
    const std::size_t rows = std::min(kRows, row_end - o);
    for (std::size_t r = 0; r < rows; ++r) {
      // The next block's row in this slot: its bytes arrive while these are decoded and used.
      if (o + kRows + r < row_end) PrefetchBytes(dec.data() + (o + kRows + r) * rb, rb);
      DecodeRow(dec, o + r, 0, ldx, wb + r * ldx);
    }
    if (rows == kRows) {
      RowBlock<kRows>(WeightRows<float, false>{wb, ldx}, ldx, xs, ldx, n_tokens, y + o, out);
    } else {
      for (std::size_t r = 0; r < rows; ++r) {
        RowBlock<1>(WeightRows<float, false>{wb + r * ldx, ldx}, ldx, xs, ldx, n_tokens, y + o + r, out);
      }
    }
  }
}

// y[t, o] = Σ_i W[o][i] · x[t][i] for o in [row_begin, row_end) and every token t < n_tokens
// (x: [n_tokens, in], y: [n_tokens, out]), by the path for n_tokens (see the file comment).
template <class Decoder>
void DecodedMatmulRows(const Decoder& dec, std::size_t in, const float* x, std::size_t n_tokens,
                       float* y, std::size_t out, std::size_t row_begin, std::size_t row_end) {
  if (row_begin >= row_end || n_tokens == 0) return;
  const std::size_t ldx = (in + Decoder::kUnit - 1) / Decoder::kUnit * Decoder::kUnit;
  float* xs = TokenBuffer(n_tokens * ldx);
  for (std::size_t t = 0; t < n_tokens; ++t) dec.Stage(x + t * in, xs + t * ldx);
  if (n_tokens >= static_cast<std::size_t>(kGemmMinTokens)) {
    GemmRows(DecodedWeights<Decoder>{&dec, ldx}, ldx, xs, n_tokens, y, out, row_begin, row_end);
  } else if (n_tokens == 1) {
    const auto base = reinterpret_cast<std::uintptr_t>(dec.data());
    for (std::size_t o = row_begin; o < row_end; ++o) y[o] = dec.Dot(o, xs, base + (o + 1) * dec.row_bytes());
  } else if (n_tokens == 2) {
    DecodedGemvFew<2>(dec, xs, ldx, y, out, row_begin, row_end);
  } else if (n_tokens == 3) {
    DecodedGemvFew<3>(dec, xs, ldx, y, out, row_begin, row_end);
  } else if (n_tokens == kGemvTokens) {
    DecodedGemvFew<kGemvTokens>(dec, xs, ldx, y, out, row_begin, row_end);
  } else {
    DecodedGemvTokens(dec, xs, ldx, n_tokens, y, out, row_begin, row_end);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

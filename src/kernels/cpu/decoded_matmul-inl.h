// Per-target y = x · Wᵀ over weight rows that a RowDecoder turns into f32 vectors on the fly
// (gemm_int: kInt codes; gemm_fp8: FP8 bytes). Three paths, as matmul_float's:
//   1 token: a fused decode GEMV, each decoded vector FMA'd straight into per-vector
//     accumulators (the weights stream from memory once; decode is memory-bound);
//   2 .. kGemmMinTokens−1 tokens: kGemvRows rows at a time decoded once into an L1-resident
//     f32 buffer, then gemv_tiles' register tiles (kGemvRows rows × 4 tokens) reuse them for
//     every token;
//   kGemmMinTokens+ tokens: the packed GEMM (gemm_tiles-inl.h), whose weight blocks the
//     decoder fills.
//
// A RowDecoder has `D`, `V`, kUnit (values per step, a multiple of Lanes(D)), kVectors =
// kUnit / Lanes, data() and row_bytes() (rows are contiguous), Start(row, begin) (begin a
// multiple of kUnit) and Unit(u, V (&w)[kVectors]): the f32 weights of values u .. u + kUnit − 1
// of the started row, units in increasing order, lanes past the row length 0.
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

#include "kernels/cpu/gemm_tiles-inl.h"
#include "kernels/cpu/gemv_tiles-inl.h"
#include "peregrine/kernels/cpu/float_matmul.h"
#include "peregrine/kernels/cpu/gemv_float.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, end − begin) = W[row][begin, end) (begin a multiple of kUnit); whole units are
// stored, so dst needs room up to the next multiple of kUnit (zeros past the row length).
// dst: vector-aligned.
template <class Decoder>
HWY_INLINE void DecodeRow(Decoder& dec, std::size_t row, std::size_t begin, std::size_t end,
                          float* HWY_RESTRICT dst) {
  const typename Decoder::D d;
  const std::size_t n = hn::Lanes(d);
  dec.Start(row, begin);
  for (std::size_t u = begin; u < end; u += Decoder::kUnit) {
    typename Decoder::V w[Decoder::kVectors];
    dec.Unit(u, w);
    for (std::size_t j = 0; j < Decoder::kVectors; ++j) hn::Store(w[j], d, dst + (u - begin) + j * n);
  }
}

// The GEMM's WeightSource (gemm_tiles-inl.h) for a RowDecoder.
template <class Decoder>
struct DecodedWeights {
  Decoder* dec;
  std::size_t in;

  void PackRow(std::size_t row, std::size_t k0, std::size_t kc, float* HWY_RESTRICT dst) const {
    DecodeRow(*dec, row, k0, k0 + kc, dst);
  }
  // The row's bytes in proportion to its values (the header of scales comes first).
  void PrefetchRow(std::size_t row, std::size_t k0, std::size_t kc) const {
    const std::size_t rb = dec->row_bytes();
    PrefetchBytes(dec->data() + row * rb + k0 * rb / in, kc * rb / in + 64);
  }
};

// 1 token: y[o] = Σ_i W[o][i] · xs[i] for o in [row_begin, row_end); xs zero-padded to a
// multiple of kUnit. Each vector of a unit has its own accumulator (kVectors independent FMA
// chains); the next row's bytes are prefetched at the rate this row is consumed.
template <class Decoder>
void DecodedGemv(Decoder& dec, std::size_t in, const float* HWY_RESTRICT xs, float* HWY_RESTRICT y,
                 std::size_t row_begin, std::size_t row_end) {
  const typename Decoder::D d;
  using V = typename Decoder::V;
  const std::size_t n = hn::Lanes(d), rb = dec.row_bytes();
  for (std::size_t o = row_begin; o < row_end; ++o) {
    const std::uintptr_t next_row = reinterpret_cast<std::uintptr_t>(dec.data() + (o + 1) * rb);
    dec.Start(o, 0);
    V acc[Decoder::kVectors];
    for (std::size_t j = 0; j < Decoder::kVectors; ++j) acc[j] = hn::Zero(d);
    for (std::size_t u = 0; u < in; u += Decoder::kUnit) {
      hwy::Prefetch(reinterpret_cast<const char*>(next_row + u * rb / in));
      V w[Decoder::kVectors];
      dec.Unit(u, w);
      for (std::size_t j = 0; j < Decoder::kVectors; ++j) acc[j] = hn::MulAdd(w[j], hn::Load(d, xs + u + j * n), acc[j]);
    }
    for (std::size_t j = 1; j < Decoder::kVectors; ++j) acc[0] = hn::Add(acc[0], acc[j]);
    y[o] = hn::GetLane(hn::SumOfLanes(d, acc[0]));
  }
}

// 2+ tokens (xs: n_tokens staged rows ldx apart, ldx a multiple of kUnit): kGemvRows rows at a
// time are decoded once into a per-thread buffer and multiplied with every token.
template <class Decoder>
void DecodedGemvTokens(Decoder& dec, std::size_t in, const float* xs, std::size_t ldx,
                       std::size_t n_tokens, float* y, std::size_t out, std::size_t row_begin,
                       std::size_t row_end) {
  constexpr std::size_t kRows = static_cast<std::size_t>(kGemvRows);
  thread_local hwy::AlignedFreeUniquePtr<float[]> buffer;
  thread_local std::size_t capacity = 0;
  if (kRows * ldx > capacity) {
    capacity = kRows * ldx;
    buffer = hwy::AllocateAligned<float>(capacity);
  }
  float* wb = buffer.get();
  for (std::size_t o = row_begin; o < row_end; o += kRows) {
    const std::size_t rows = std::min(kRows, row_end - o);
    for (std::size_t r = 0; r < rows; ++r) DecodeRow(dec, o + r, 0, in, wb + r * ldx);
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
void DecodedMatmulRows(Decoder& dec, std::size_t in, const float* x, std::size_t n_tokens,
                       float* y, std::size_t out, std::size_t row_begin, std::size_t row_end) {
  if (row_begin >= row_end || n_tokens == 0) return;
  if (n_tokens >= static_cast<std::size_t>(kGemmMinTokens)) {
    GemmRows(DecodedWeights<Decoder>{&dec, in}, in, x, n_tokens, y, out, row_begin, row_end);
    return;
  }
  const std::size_t ldx = (in + Decoder::kUnit - 1) / Decoder::kUnit * Decoder::kUnit;
  const float* xs = StageTokens(x, n_tokens, in, ldx);
  if (n_tokens == 1) {
    DecodedGemv(dec, in, xs, y, row_begin, row_end);
  } else {
    DecodedGemvTokens(dec, in, xs, ldx, n_tokens, y, out, row_begin, row_end);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

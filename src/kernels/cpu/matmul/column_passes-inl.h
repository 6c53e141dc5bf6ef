// The walk of the multi-token "passes" GEMVs over 16-row packed groups (half_packed.cpp: F16/BF16
// widened to f32, one multiply-add per column and token; gemv_bf16_dot.cpp: one VPERMW and one
// VDPBF16PS per column pair and token). S row groups side by side, each its own read stream, and
// T tokens at once, so each weight vector loaded serves every token.
//
// The steps (columns, or column pairs) go in blocks of kBlock. Step i adds to partial sum i mod 4,
// in order, as the kernels' other paths do, so the sums are theirs bit for bit. Each block is
// walked in 4 / P passes, pass k over the steps of partial sums kP .. kP + P - 1: S·T·P
// accumulators sit in registers, and all 4·S·T of them in L1 between passes. While a block's
// passes run, the next block's lines of every stream are hinted into L1, spread evenly over the
// passes' steps (addresses past the weights' end are hints only, never dereferenced).
//
// Highway "-inl.h" convention: re-included once per target by foreach_target (half_packed.cpp),
// so the include guard toggles with HWY_TARGET_TOGGLE instead of #pragma once; a file compiled
// once for a target of its own (gemv_bf16_dot.cpp: AVX-512 BF16 by #pragma GCC target) includes
// it under that pragma, so that the walk and the kernel's steps share one target and inline.
#if defined(PEREGRINE_KERNELS_CPU_COLUMN_PASSES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_COLUMN_PASSES_INL_H_
#undef PEREGRINE_KERNELS_CPU_COLUMN_PASSES_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_COLUMN_PASSES_INL_H_
#endif

#include <cstddef>

#include <hwy/highway.h>

#include "kernels/cpu/matmul/decode_prefetch.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

/// Runs the walk above over n_steps steps of the S streams in `kernel`, then hands each stream s
/// and token t its total (s0 + s1) + (s2 + s3). A stream is one vector of a group's rows: the
/// kernel provides `V` (a vector of at most 16 f32) with `zero()`, `load(const float*)` /
/// `store(V, float*)` (64-byte aligned) and `add(V, V)`; `kStreamParts` (streams per group, the
/// streams of one group adjacent); `kStepBytes` (bytes of one group per step, a divisor or
/// multiple of 64); `stream(s)` (stream s's packed weights, within its group's bytes: hinted for
/// the first stream of each group); `step(acc, i, p)` (adds step i of every stream and token into
/// acc[s][t][p], acc a V[S][T][P]); and `finish(s, t, sum)`. P divides 4 and kBlock.
template <std::size_t S, std::size_t T, std::size_t P, std::size_t kBlock, class Kernel>
HWY_INLINE void walk_column_passes(std::size_t n_steps, Kernel& kernel) {
  using V = typename Kernel::V;
  constexpr std::size_t kSums = 4, kLanes = 16;
  constexpr std::size_t kSteps = kBlock / P;  // per block, over all its passes
  constexpr std::size_t kLines = kBlock * Kernel::kStepBytes / 64;
  alignas(64) float sums[S][T][kSums][kLanes];
  for (std::size_t s = 0; s < S; ++s) {
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t u = 0; u < kSums; ++u) kernel.store(kernel.zero(), sums[s][t][u]);
    }
  }
  // Steps [b, b + n) (n = N when N > 0).
  const auto block = [&]<std::size_t N>(std::size_t b, std::size_t n_dynamic) {
    const std::size_t n = N > 0 ? N : n_dynamic;
    std::size_t step = 0;
    for (std::size_t u0 = 0; u0 < kSums; u0 += P) {
      V acc[S][T][P];
      for (std::size_t s = 0; s < S; ++s) {
        for (std::size_t t = 0; t < T; ++t) {
          for (std::size_t p = 0; p < P; ++p) acc[s][t][p] = kernel.load(sums[s][t][u0 + p]);
        }
      }
      for (std::size_t i = b + u0; i < b + n; i += kSums, ++step) {
        for (std::size_t line = step * kLines / kSteps; line < (step + 1) * kLines / kSteps; ++line) {
          for (std::size_t s = 0; s < S; s += Kernel::kStreamParts) {
            prefetch_line_l1(kernel.stream(s) + (b + kBlock) * Kernel::kStepBytes + line * 64);
          }
        }
        for (std::size_t p = 0; p < P && i + p < b + n; ++p) kernel.step(acc, i + p, p);
      }
      for (std::size_t s = 0; s < S; ++s) {
        for (std::size_t t = 0; t < T; ++t) {
          for (std::size_t p = 0; p < P; ++p) kernel.store(acc[s][t][p], sums[s][t][u0 + p]);
        }
      }
    }
  };
  std::size_t b = 0;
  for (; b + kBlock <= n_steps; b += kBlock) block.template operator()<kBlock>(b, 0);
  if (b < n_steps) block.template operator()<0>(b, n_steps - b);
  for (std::size_t s = 0; s < S; ++s) {
    for (std::size_t t = 0; t < T; ++t) {
      kernel.finish(s, t, kernel.add(kernel.add(kernel.load(sums[s][t][0]), kernel.load(sums[s][t][1])),
                                     kernel.add(kernel.load(sums[s][t][2]), kernel.load(sums[s][t][3]))));
    }
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PEREGRINE_KERNELS_CPU_COLUMN_PASSES_INL_H_

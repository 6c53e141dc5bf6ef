// Per-target packed prefill GEMM shared by every weight format: the f32 register tiles of
// gemm_float (F32/F16/BF16 weights), gemm_int (kInt) and gemm_fp8 (FP8) are the same; only how a
// block of weights becomes f32 differs (a WeightSource).
//
// After Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication" (ACM TOMS
// 2008), with the roles set by y's layout: x is packed (per call, n_tokens·in floats) into
// k-major panels of 2 SIMD vectors of tokens, zero-padded; blocks of kRows weight rows × 256
// inputs are decoded to f32 into an L1-resident buffer (the next block prefetched into L2); the
// micro-kernel keeps a kRows × 2-vector tile of yᵀ in registers (one broadcast weight × one token
// vector per FMA). Partial sums accumulate in a 4·kRows-row yᵀ buffer across input blocks, then
// are transposed into y.
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_GEMM_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_GEMM_TILES_INL_H_
#undef PEREGRINE_KERNELS_CPU_GEMM_TILES_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_GEMM_TILES_INL_H_
#endif

#include <algorithm>
#include <cstddef>

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "peregrine/kernels/cpu/matmul/gemm_float.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Micro-tile: kRows weight rows × kPanelVectors token vectors of accumulators. kGemmRows
// (24 accumulators) fits AVX-512's 32 vector registers; x86 targets below it have 16.
constexpr std::size_t kRows = static_cast<std::size_t>(
    HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3 ? kGemmRows / 2 : kGemmRows);
constexpr std::size_t kPanelVectors = 2;
constexpr std::size_t kBlockInputs = 256;  // inputs per packed weight block (kRows × 256 f32 = 12 KiB, L1)
constexpr std::size_t kBlockRows = 4 * kRows;  // rows per yᵀ accumulation block

// Tokens per packed panel.
HWY_INLINE std::size_t PanelTokens() { return kPanelVectors * hn::Lanes(hn::ScalableTag<float>()); }

// xp[p][i][j] = x[p * nr + j][i] (k-major panels of nr tokens, zero rows past n_tokens).
inline void PackTokens(const float* HWY_RESTRICT x, std::size_t n_tokens, std::size_t in,
                       std::size_t n_panels, float* HWY_RESTRICT xp) {
  const std::size_t nr = PanelTokens();
  for (std::size_t p = 0; p < n_panels; ++p) {
    for (std::size_t j = 0; j < nr; ++j) {
      const std::size_t t = p * nr + j;
      float* dst = xp + p * in * nr + j;
      for (std::size_t i = 0; i < in; ++i) dst[i * nr] = t < n_tokens ? x[t * in + i] : 0.0f;
    }
  }
}

// yᵀ tile: ct[r][v*N + lane] (+)= Σ_{i < kc} wp[r][i] · xp[i][v*N + lane] for r < kRows,
// v < kVectors. wp: kRows rows kBlockInputs apart; xp: k-major, PanelTokens() per input;
// ct rows ld_ct apart. kVectors = 1 serves a last panel holding <= N real tokens.
template <std::size_t kVectors>
HWY_INLINE void MicroKernel(const float* HWY_RESTRICT wp, const float* HWY_RESTRICT xp,
                            std::size_t kc, float* HWY_RESTRICT ct, std::size_t ld_ct,
                            bool accumulate) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const std::size_t n = hn::Lanes(d), nr = PanelTokens();
  V acc[kRows][kVectors];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < kVectors; ++v) {
      acc[r][v] = accumulate ? hn::Load(d, ct + r * ld_ct + v * n) : hn::Zero(d);
    }
  }
  for (std::size_t i = 0; i < kc; ++i) {
    V xv[kVectors];
    for (std::size_t v = 0; v < kVectors; ++v) xv[v] = hn::Load(d, xp + i * nr + v * n);
    for (std::size_t r = 0; r < kRows; ++r) {
      const V wb = hn::Set(d, wp[r * kBlockInputs + i]);
      for (std::size_t v = 0; v < kVectors; ++v) acc[r][v] = hn::MulAdd(wb, xv[v], acc[r][v]);
    }
  }
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < kVectors; ++v) hn::Store(acc[r][v], d, ct + r * ld_ct + v * n);
  }
}

// A WeightSource gives the GEMM f32 weights of a [out, in] matrix in any stored format:
//   void PackRow(std::size_t row, std::size_t k0, std::size_t kc, float* dst) const:
//       dst[0, kc) = W[row][k0, k0 + kc) as f32 (k0 is a multiple of kBlockInputs; dst has
//       room for kBlockInputs floats, so whole vectors may be stored past kc);
//   void PrefetchRow(std::size_t row, std::size_t k0, std::size_t kc) const: asks for the bytes
//       of W[row][k0, k0 + kc) to be brought into L2.
// GemmRows computes y[t, o] = Σ_i W[o, i] · x[t, i] for o in [row_begin, row_end), every token
// t < n_tokens (y: [n_tokens, out]), each dot product accumulated in f32 in order of i.
template <class WeightSource>
void GemmRows(const WeightSource& w, std::size_t in, const float* x, std::size_t n_tokens,
              float* y, std::size_t out, std::size_t row_begin, std::size_t row_end) {
  if (row_begin >= row_end || n_tokens == 0) return;
  const std::size_t n = hn::Lanes(hn::ScalableTag<float>()), nr = PanelTokens();
  const std::size_t n_panels = (n_tokens + nr - 1) / nr, ld_ct = n_panels * nr;
  auto xp = hwy::AllocateAligned<float>(n_panels * in * nr);
  auto wp = hwy::AllocateAligned<float>(kRows * kBlockInputs);
  auto ct = hwy::AllocateAligned<float>(kBlockRows * ld_ct);
  PackTokens(x, n_tokens, in, n_panels, xp.get());
  for (std::size_t ob = row_begin; ob < row_end; ob += kBlockRows) {
    const std::size_t ob_end = std::min(ob + kBlockRows, row_end);
    for (std::size_t k0 = 0; k0 < in; k0 += kBlockInputs) {
      const std::size_t kc = std::min(kBlockInputs, in - k0);
      for (std::size_t og = ob; og < ob_end; og += kRows) {
        const std::size_t rows = std::min(kRows, ob_end - og);
        for (std::size_t r = 0; r < kRows; ++r) {
          float* dst = wp.get() + r * kBlockInputs;
          if (r < rows) {
            w.PackRow(og + r, k0, kc, dst);
          } else {
            std::fill(dst, dst + kc, 0.0f);
          }
        }
        // The block the loop packs next in the same row slot: its DRAM latency overlaps the
        // micro-kernels.
        const bool last_block = k0 + kc == in;
        const std::size_t next_row = last_block ? og + kBlockRows : og;
        const std::size_t next_k0 = last_block ? 0 : k0 + kc;
        for (std::size_t r = next_row; r < std::min(next_row + kRows, row_end); ++r) {
          w.PrefetchRow(r, next_k0, std::min(kBlockInputs, in - next_k0));
        }
        float* ct_rows = ct.get() + (og - ob) * ld_ct;
        for (std::size_t p = 0; p < n_panels; ++p) {
          const float* xp_block = xp.get() + (p * in + k0) * nr;
          if (n_tokens - p * nr <= n) {
            MicroKernel<1>(wp.get(), xp_block, kc, ct_rows + p * nr, ld_ct, k0 > 0);
          } else {
            MicroKernel<kPanelVectors>(wp.get(), xp_block, kc, ct_rows + p * nr, ld_ct, k0 > 0);
          }
        }
      }
    }
    for (std::size_t t = 0; t < n_tokens; ++t) {
      for (std::size_t o = ob; o < ob_end; ++o) y[t * out + o] = ct[(o - ob) * ld_ct + t];
    }
  }
}

// Prefetches bytes [begin, end) into L2, one hint per cache line.
HWY_INLINE void PrefetchBytes(const void* begin, std::size_t n_bytes) {
  const char* p = static_cast<const char*>(begin);
  for (std::size_t b = 0; b < n_bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

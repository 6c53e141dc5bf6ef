#include "peregrine/kernels/cpu/gemm_float.h"

#include <algorithm>
#include <cstddef>

#include <hwy/aligned_allocator.h>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemm_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

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
void PackTokens(const float* HWY_RESTRICT x, std::size_t n_tokens, std::size_t in,
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

// wp[r][0, kc) = W[r][k0, k0 + kc) widened to f32, for r < rows (row stride `in`); rows
// rows..kRows-1 are zero. wp rows are kBlockInputs apart.
template <class WT>
void PackWeights(const WT* HWY_RESTRICT w, std::size_t in, std::size_t rows, std::size_t k0,
                 std::size_t kc, float* HWY_RESTRICT wp) {
  const hn::ScalableTag<float> d;
  const std::size_t n = hn::Lanes(d);
  for (std::size_t r = 0; r < kRows; ++r) {
    float* dst = wp + r * kBlockInputs;
    if (r >= rows) {
      std::fill(dst, dst + kc, 0.0f);
      continue;
    }
    const WT* src = w + r * in + k0;
    std::size_t i = 0;
    for (; i + n <= kc; i += n) hn::Store(LoadAsF32(d, src + i), d, dst + i);
    for (; i < kc; ++i) dst[i] = ScalarAsF32(src + i);
  }
}

// Asks for W[r][k0, k0 + kc), r < rows, to be brought into L2 (row stride `in`): the block
// the loop packs next in the same row slot, so its DRAM latency overlaps the micro-kernels.
template <class WT>
void PrefetchWeights(const WT* w, std::size_t in, std::size_t rows, std::size_t k0,
                     std::size_t kc) {
  for (std::size_t r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(w + r * in + k0);
    for (std::size_t b = 0; b < kc * sizeof(WT); b += 64) __builtin_prefetch(row + b, 0, 2);
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

template <class WT>
void GemmRows(const WT* w, std::size_t in, const float* x, std::size_t n_tokens, float* y,
              std::size_t out, std::size_t row_begin, std::size_t row_end) {
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
        PackWeights(w + og * in, in, std::min(kRows, ob_end - og), k0, kc, wp.get());
        const bool last_block = k0 + kc == in;
        const std::size_t next_row = last_block ? og + kBlockRows : og;
        const std::size_t next_k0 = last_block ? 0 : k0 + kc;
        if (next_row < row_end) {
          PrefetchWeights(w + next_row * in, in, std::min(kRows, row_end - next_row), next_k0,
                          std::min(kBlockInputs, in - next_k0));
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

void GemmFloat(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
               std::int64_t row_begin, std::int64_t row_end) {
  if (row_begin >= row_end || n_tokens <= 0) return;
  WithWeightType(w.dtype, [&](auto tag) {
    using WT = decltype(tag);
    GemmRows(static_cast<const WT*>(w.data), static_cast<std::size_t>(w.row_length()), x,
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

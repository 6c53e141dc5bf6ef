#include "peregrine/kernels/cpu/matmul/gemm_bf16_dot.h"
#include "peregrine/kernels/cpu/isa.h"

#if defined(__x86_64__)  // the AVX-512 BF16 kernel's intrinsics
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include <hwy/aligned_allocator.h>

#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

constexpr std::size_t kRows = 12;        // output rows per micro-tile: 24 accumulators of 32 registers
constexpr std::size_t kPanel = 32;       // tokens per panel: two vectors of 16 f32 lanes
constexpr std::size_t kBlockPairs = 256; // input pairs per block: a panel's block of x is 32 KiB

#if defined(__x86_64__)  // AVX-512 BF16 (VDPBF16PS); other architectures have no kernel
#define PEREGRINE_BF16_DOT __attribute__((target("avx512f,avx512vl,avx512bf16")))

// xp[p][j][c] = (bf16(x[t][2j]), bf16(x[t][2j + 1])) as one uint32, low half first, for token
// t = 32p + c; zero past n_tokens.
PEREGRINE_BF16_DOT void pack_tokens(const float* x, std::size_t n_tokens, std::size_t pairs, std::size_t n_panels,
                                    std::uint32_t* xp) {
  std::fill(xp, xp + n_panels * pairs * kPanel, 0u);
  for (std::size_t t = 0; t < n_tokens; ++t) {
    std::uint32_t* dst = xp + (t / kPanel) * pairs * kPanel + t % kPanel;
    const float* row = x + t * 2 * pairs;
    std::size_t j = 0;
    for (; j + 8 <= pairs; j += 8) {
      alignas(32) std::uint32_t p[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(row + 2 * j))));
      for (std::size_t e = 0; e < 8; ++e) dst[(j + e) * kPanel] = p[e];
    }
    for (; j < pairs; ++j) dst[j * kPanel] = f32_pair_to_bf16(row[2 * j], row[2 * j + 1]);
  }
}

// ct[r][16v + lane] (+)= Σ_{j < kc} pair_dot(W row r's pair j, xp[j][16v + lane]) for r < kRows,
// v < V. Row r is read at w + min(r, rows - 1)·row_bytes (rows past `rows` repeat the last real
// one; their sums are not used). xp: kc pairs of one panel, 32 per pair; ct rows ld apart.
template <std::size_t V>
PEREGRINE_BF16_DOT inline void micro_kernel(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows,
                                            const std::uint32_t* xp, std::size_t kc, float* ct, std::size_t ld,
                                            bool accumulate) {
  const std::uint8_t* row[kRows];
  for (std::size_t r = 0; r < kRows; ++r) row[r] = w + std::min(r, rows - 1) * row_bytes;
  __m512 acc[kRows][V];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = accumulate ? _mm512_load_ps(ct + r * ld + 16 * v) : _mm512_setzero_ps();
  }
  for (std::size_t j = 0; j < kc; ++j) {
    __m512bh xv[V];
    for (std::size_t v = 0; v < V; ++v) xv[v] = reinterpret_cast<__m512bh>(_mm512_load_si512(xp + j * kPanel + 16 * v));
    for (std::size_t r = 0; r < kRows; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, row[r] + 4 * j, 4);
      const auto wb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
      for (std::size_t v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wb, xv[v]);
    }
  }
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < V; ++v) _mm512_store_ps(ct + r * ld + 16 * v, acc[r][v]);
  }
}

// Rows [og, og + rows) of y for every token: the input blocks in order, each against every
// panel while its 12 row blocks sit in L1.
PEREGRINE_BF16_DOT void row_group(const std::uint8_t* w, std::size_t row_bytes, std::size_t rows, std::size_t pairs,
                                  const std::uint32_t* xp, std::size_t n_tokens, float* ct, std::size_t ld) {
  const std::size_t n_panels = ld / kPanel;
  for (std::size_t j0 = 0; j0 < pairs; j0 += kBlockPairs) {
    const std::size_t kc = std::min(kBlockPairs, pairs - j0);
    for (std::size_t p = 0; p < n_panels; ++p) {
      const std::uint32_t* xb = xp + (p * pairs + j0) * kPanel;
      if (n_tokens - p * kPanel <= 16) {
        micro_kernel<1>(w + 4 * j0, row_bytes, rows, xb, kc, ct + p * kPanel, ld, j0 > 0);
      } else {
        micro_kernel<2>(w + 4 * j0, row_bytes, rows, xb, kc, ct + p * kPanel, ld, j0 > 0);
      }
    }
  }
}

bool has_avx512_bf16() {
  static const bool bf16 = __builtin_cpu_supports("avx512bf16");
  return bf16 && isa_level() >= IsaLevel::kAvx512;
}
#else
bool has_avx512_bf16() { return false; }
#endif  // __x86_64__

}  // namespace

bool gemm_bf16_dot_available() { return has_avx512_bf16(); }

bool gemm_bf16_dot_takes(const TensorView& w) {
  if (w.dtype != DType::kBF16 || w.shape.size() != 2) return false;
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && in > 0 && in % 2 == 0 && reinterpret_cast<std::uintptr_t>(w.data) % 4 == 0 &&
         w.nbytes == static_cast<std::size_t>(out * in) * 2;
}

void gemm_bf16_dot(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
                   std::int64_t row_begin, std::int64_t row_end) {
#if defined(__x86_64__)
  if (row_begin >= row_end || n_tokens <= 0) return;
  const auto out = static_cast<std::size_t>(w.n_rows()), pairs = static_cast<std::size_t>(w.row_length()) / 2;
  const auto tokens = static_cast<std::size_t>(n_tokens);
  const std::size_t n_panels = (tokens + kPanel - 1) / kPanel, ld = n_panels * kPanel, row_bytes = 4 * pairs;
  auto xp = hwy::AllocateAligned<std::uint32_t>(n_panels * pairs * kPanel);
  auto ct = hwy::AllocateAligned<float>(kRows * ld);
  pack_tokens(x.data(), tokens, pairs, n_panels, xp.get());
  const auto* base = static_cast<const std::uint8_t*>(w.data);
  for (auto og = static_cast<std::size_t>(row_begin); og < static_cast<std::size_t>(row_end); og += kRows) {
    const std::size_t rows = std::min(kRows, static_cast<std::size_t>(row_end) - og);
    row_group(base + og * row_bytes, row_bytes, rows, pairs, xp.get(), tokens, ct.get(), ld);
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t r = 0; r < rows; ++r) y[t * out + og + r] = ct[r * ld + t];
    }
  }
#else  // no kernel (gemm_bf16_dot_available() is false): the scalar reference
  gemm_bf16_dot_reference(w, x, n_tokens, y, row_begin, row_end);
#endif
}

void gemm_bf16_dot_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                             std::span<float> y, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto* bits = static_cast<const std::uint16_t*>(w.data);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = row_begin; o < row_end; ++o) {
      float acc = 0.0f;
      for (std::int64_t i = 0; i < in; ++i) {
        const float xi = bf16_to_f32(f32_to_bf16(x[static_cast<std::size_t>(t * in + i)]));
        acc += bf16_to_f32(bits[o * in + i]) * xi;
      }
      y[static_cast<std::size_t>(t * out + o)] = acc;
    }
  }
}

}  // namespace peregrine

#include "peregrine/kernels/cpu/sparse/sparse_nm_q8.h"
#include "peregrine/kernels/cpu/isa.h"

#if defined(__x86_64__)  // simd_dot's AVX-512 intrinsics
#include <immintrin.h>
#endif

#include <array>
#include <cmath>
#include <cstring>

#include "kernels/cpu/row_split.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

constexpr std::int64_t kCols = 64;  // columns per stored block of 32 kept values

// Where a sparse row's parts are: stored blocks (f16 d + codes), then the mask.
struct RowLayout {
  bool q4 = false;
  std::size_t block_bytes = 0, row_bytes = 0, blocks = 0;
  explicit RowLayout(const TensorView& w)
      : q4(w.dtype == DType::kQ4_0_S24 || w.dtype == DType::kQ4_0_S48),
        block_bytes(q4 ? 18 : 34),
        row_bytes(*w.row_bytes()),
        blocks(static_cast<std::size_t>(w.row_length() / kCols)) {}
  const std::uint8_t* row(const TensorView& w, std::int64_t o) const {
    return static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(o) * row_bytes;
  }
  const std::uint8_t* mask(const std::uint8_t* row) const { return row + blocks * block_bytes; }
};

// Sixteen lanes: blocks 2i in lanes 0–7 and 2i + 1 in lanes 8–15 (a last odd block in 0–7);
// summed (l, l + 8), then (l, l + 4), then (0, 2) and (1, 3), then the two.
float sum_lanes(const std::array<float, 16>& a) {
  std::array<float, 4> s{};
  for (std::size_t l = 0; l < 4; ++l) s[l] = (a[l] + a[l + 8]) + (a[l + 4] + a[l + 12]);
  return (s[0] + s[2]) + (s[1] + s[3]);
}

float reference_dot(const RowLayout& L, const std::uint8_t* row, const std::int8_t* xq, const float* xd) {
  const std::uint8_t* mask = L.mask(row);
  std::array<float, 16> acc{};
  std::size_t col = 0;  // the next column to look at for a set mask bit
  for (std::size_t b = 0; b < L.blocks; ++b) {
    const std::uint8_t* blk = row + b * L.block_bytes;
    std::array<int, 32> code{}, x{};
    for (int j = 0; j < 32; ++j) {
      while (((mask[col / 8] >> (col % 8)) & 1u) == 0) ++col;
      x[static_cast<std::size_t>(j)] = xq[col++];
      code[static_cast<std::size_t>(j)] =
          L.q4 ? ((j < 16 ? blk[2 + j] & 0x0F : blk[2 + j - 16] >> 4) - 8) : static_cast<std::int8_t>(blk[2 + j]);
    }
    std::uint16_t h;
    std::memcpy(&h, blk, 2);
    const float dw = f16_to_f32(h);
    const bool upper = b % 2 == 1;
    for (int l = 0; l < 8; ++l) {
      int s = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) s += code[static_cast<std::size_t>(j)] * x[static_cast<std::size_t>(j)];
      float& a = acc[static_cast<std::size_t>(l + (upper ? 8 : 0))];
      a = std::fma(static_cast<float>(s), xd[2 * b + static_cast<std::size_t>(l / 4)] * dw, a);
    }
  }
  return sum_lanes(acc);
}

#if defined(__x86_64__)  // AVX-512 VNNI; other architectures take reference_dot
// GCC 12 reports a false -Wmaybe-uninitialized (Release) / -Wuninitialized (-Og, the sanitizer
// build) inside its own 256 ↔ 512-bit casts (built on _mm256_undefined_pd), as for Eigen's
// AVX-512 code (CMakeLists.txt).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define PEREGRINE_SPARSE_Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi2,f16c,fma")))

// The 32 activation bytes under block b's kept columns (16 from each of its two activation
// blocks, in column order).
PEREGRINE_SPARSE_Q8_TARGET __m256i kept_activations(const std::uint8_t* mask, const std::int8_t* xq, std::size_t b) {
  std::uint64_t bits;
  std::memcpy(&bits, mask + 8 * b, 8);
  return _mm512_castsi512_si256(_mm512_maskz_compress_epi8(bits, _mm512_loadu_si512(xq + kCols * b)));
}

// Block b's 32 codes as bytes: Q4_0 nibbles as 0..15 (low nibbles first), Q8_0 as stored.
template <bool kQ4>
PEREGRINE_SPARSE_Q8_TARGET __m256i block_codes(const std::uint8_t* blk) {
  if constexpr (!kQ4) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  const __m128i nib = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(nib, 4), nib), _mm256_set1_epi8(0x0F));
}

// Σ over each 4 consecutive bytes of codes × activations (int32 lanes): Q4_0's −8 offset as
// −8 · Σx; Q8_0 as |w| against x · sign(w).
template <bool kQ4>
PEREGRINE_SPARSE_Q8_TARGET __m512i lane_sums(__m512i w, __m512i x) {
  const __m512i zero = _mm512_setzero_si512();
  if constexpr (kQ4) {
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, w, x),
                            _mm512_slli_epi32(_mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), x), 3));
  }
  const __m512i sign_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), zero, x);  // x · sign(w), w = 0 → x
  return _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), sign_x);
}

template <bool kQ4>
PEREGRINE_SPARSE_Q8_TARGET float simd_dot(const RowLayout& L, const std::uint8_t* row, const std::int8_t* xq,
                                          const float* xd) {
  const std::uint8_t* mask = L.mask(row);
  // lane → which of the step's four scales (dw0·dx0, dw0·dx1, dw1·dx2, dw1·dx3) it takes.
  const __m512i scale_index = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  std::size_t b = 0;
  for (; b + 2 <= L.blocks; b += 2) {  // two blocks per step: lanes 0–7 and 8–15
    const std::uint8_t* blk = row + b * L.block_bytes;
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(kept_activations(mask, xq, b)), kept_activations(mask, xq, b + 1), 1);
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(block_codes<kQ4>(blk)), block_codes<kQ4>(blk + L.block_bytes), 1);
    std::uint16_t h[2];
    std::memcpy(&h[0], blk, 2);
    std::memcpy(&h[1], blk + L.block_bytes, 2);
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h[0] | (static_cast<std::uint32_t>(h[1]) << 16))));
    const __m128 scales = _mm_mul_ps(_mm_loadu_ps(xd + 2 * b), _mm_unpacklo_ps(dw, dw));  // dx · dw per activation block
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_sums<kQ4>(w, x)),
                          _mm512_permutexvar_ps(scale_index, _mm512_castps128_ps512(scales)), acc);
  }
  if (b < L.blocks) {  // a last odd block, into lanes 0–7
    const std::uint8_t* blk = row + b * L.block_bytes;
    std::uint16_t h;
    std::memcpy(&h, blk, 2);
    const float dw = _cvtsh_ss(h);
    const __m512 scale = _mm512_castps256_ps512(_mm256_set_m128(_mm_set1_ps(xd[2 * b + 1] * dw), _mm_set1_ps(xd[2 * b] * dw)));
    const __m512i sums = lane_sums<kQ4>(_mm512_castsi256_si512(block_codes<kQ4>(blk)), _mm512_castsi256_si512(kept_activations(mask, xq, b)));
    acc = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, acc, 0x00FF);
  }
  std::array<float, 16> lanes;
  _mm512_storeu_ps(lanes.data(), acc);
  return sum_lanes(lanes);
}
#pragma GCC diagnostic pop
#endif  // __x86_64__

template <typename Dot>
void rows(const TensorView& w, const QuantizedActivations& xq, std::span<float> y, std::int64_t begin, std::int64_t end,
          Dot dot) {
  const RowLayout L(w);
  const std::int64_t out = w.n_rows(), in = w.row_length();
  for (std::int64_t o = begin; o < end; ++o) {
    const std::uint8_t* row = L.row(w, o);
    for (std::int64_t t = 0; t < xq.n_tokens; ++t) {
      y[static_cast<std::size_t>(t * out + o)] =
          dot(L, row, &xq.q[static_cast<std::size_t>(t * in)], &xq.d[static_cast<std::size_t>(t * in / 32)]);
    }
  }
}

}  // namespace

bool sparse_q8_supported() {
#if defined(__x86_64__)
  return isa_level() >= IsaLevel::kAvx512Vnni;  // AVX-512 F/BW/VL, VNNI, VBMI2
#else
  return false;  // the portable reference_dot only (gemv_sparse_q8 still runs, with it)
#endif
}

void gemv_sparse_q8(const TensorView& w, const QuantizedActivations& xq, std::span<float> y, ThreadPool& pool,
                    std::int64_t min_parallel_macs) {
  split_rows(w.n_rows(), w.row_length() * xq.n_tokens, 1, pool, min_parallel_macs,
             [&](std::int64_t begin, std::int64_t end) {
#if defined(__x86_64__)
               if (RowLayout(w).q4) {
                 rows(w, xq, y, begin, end, simd_dot<true>);
               } else {
                 rows(w, xq, y, begin, end, simd_dot<false>);
               }
#else  // no SIMD kernel: the reference's dot product
               rows(w, xq, y, begin, end, reference_dot);
#endif
             });
}

void gemv_sparse_q8_reference(const TensorView& w, const QuantizedActivations& xq, std::span<float> y) {
  rows(w, xq, y, 0, w.n_rows(), reference_dot);
}

}  // namespace peregrine

#include "peregrine/kernels/cpu/sparse_nm_q8.h"

#include <immintrin.h>

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

// The eight lanes summed in this order: (l, l + 4) pairs, then (0, 2) and (1, 3), then the two.
float sum_lanes(const std::array<float, 8>& a) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

float reference_dot(const RowLayout& L, const std::uint8_t* row, const std::int8_t* xq, const float* xd) {
  const std::uint8_t* mask = L.mask(row);
  std::array<float, 8> acc{};
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
    for (int l = 0; l < 8; ++l) {
      int s = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) s += code[static_cast<std::size_t>(j)] * x[static_cast<std::size_t>(j)];
      acc[static_cast<std::size_t>(l)] = std::fma(static_cast<float>(s), dw * xd[2 * b + static_cast<std::size_t>(l / 4)],
                                                  acc[static_cast<std::size_t>(l)]);
    }
  }
  return sum_lanes(acc);
}

// GCC 12 reports a false -Wmaybe-uninitialized inside its own _mm512_castsi512_si256 (built on
// _mm256_undefined_pd), as for Eigen's AVX-512 code (CMakeLists.txt).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi2,f16c,fma"))) float simd_dot(
    const RowLayout& L, const std::uint8_t* row, const std::int8_t* xq, const float* xd) {
  const std::uint8_t* mask = L.mask(row);
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < L.blocks; ++b) {
    const std::uint8_t* blk = row + b * L.block_bytes;
    std::uint64_t bits;
    std::memcpy(&bits, mask + 8 * b, 8);
    const __m256i xc = _mm512_castsi512_si256(_mm512_maskz_compress_epi8(bits, _mm512_loadu_si512(xq + kCols * b)));
    __m256i s;
    if (L.q4) {
      const __m128i nib = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m256i w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(nib, 4), nib), low4);
      s = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), w, xc),
                           _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, xc), 3));
    } else {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(xc, w));
    }
    std::uint16_t h;
    std::memcpy(&h, blk, 2);
    const float dw = _cvtsh_ss(h);
    const __m256 scale = _mm256_set_m128(_mm_set1_ps(dw * xd[2 * b + 1]), _mm_set1_ps(dw * xd[2 * b]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc);
  }
  std::array<float, 8> lanes;
  _mm256_storeu_ps(lanes.data(), acc);
  return sum_lanes(lanes);
}
#pragma GCC diagnostic pop

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
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                          __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("f16c");
  return yes;
}

void gemv_sparse_q8(const TensorView& w, const QuantizedActivations& xq, std::span<float> y, ThreadPool& pool,
                    std::int64_t min_parallel_macs) {
  split_rows(w.n_rows(), w.row_length() * xq.n_tokens, 1, pool, min_parallel_macs,
             [&](std::int64_t begin, std::int64_t end) { rows(w, xq, y, begin, end, simd_dot); });
}

void gemv_sparse_q8_reference(const TensorView& w, const QuantizedActivations& xq, std::span<float> y) {
  rows(w, xq, y, 0, w.n_rows(), reference_dot);
}

}  // namespace peregrine

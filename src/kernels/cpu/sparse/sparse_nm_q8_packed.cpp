#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"
#include "peregrine/kernels/cpu/isa.h"

#if defined(__x86_64__)  // group_tokens' AVX-512 intrinsics
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/row_split.h"
#include "kernels/cpu/token_chunks.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

constexpr std::size_t kRows = 16;         // rows per group (kSparseQ8PackRows)
constexpr std::size_t kUnitCols = 64;     // columns per unit: one stored block of 32 kept values
constexpr std::size_t kSteps = 8;         // steps of 8 columns (4 kept values per row) per unit
constexpr std::size_t kStepCols = 8;
constexpr std::size_t kPosBytes = kSteps * 16;
constexpr std::size_t kScaleBytes = kRows * 2;
constexpr int kBias = 128;                // added to q_x: vpdpbusd's unsigned operand

// Where a packed matrix's parts are.
struct Layout {
  bool q4;
  std::size_t in, out;
  std::size_t code_bytes() const { return q4 ? 4 * 64 : 8 * 64; }
  std::size_t unit_bytes() const { return code_bytes() + kPosBytes + kScaleBytes; }
  std::size_t units() const { return in / kUnitCols; }
  std::size_t stored_block_bytes() const { return q4 ? 18 : 34; }
  explicit Layout(const TensorView& w)
      : q4(w.dtype == DType::kQ4_0_S24), in(static_cast<std::size_t>(w.row_length())), out(static_cast<std::size_t>(w.n_rows())) {}
};

// Bit offset of kept value k (0..3) of row e in its step's 128 position bits (word q mod 2).
std::size_t position_bit(std::size_t e, std::size_t k) {
  const std::size_t q = e / 2;
  return 64 * (q % 2) + 16 * (q / 2) + 8 * (e % 2) + 2 * k;
}

// Row e's signed code of kept value j (0..31) of a packed unit.
int packed_code(const Layout& L, const std::uint8_t* unit, std::size_t e, std::size_t j) {
  if (!L.q4) return static_cast<std::int8_t>(unit[64 * (j / 4) + 4 * e + j % 4]);
  const std::uint8_t byte = unit[64 * (j % 16 / 4) + 4 * e + j % 4];
  return (j < 16 ? byte & 0x0F : byte >> 4) - 8;
}

// Column (0..63) within its unit of row e's kept value j.
std::size_t packed_column(const std::uint8_t* unit, const Layout& L, std::size_t e, std::size_t j) {
  const std::uint8_t* pos = unit + L.code_bytes() + 16 * (j / 4);
  const std::size_t bit = position_bit(e, j % 4);
  return kStepCols * (j / 4) + 4 * (j % 4 / 2) + ((pos[bit / 8] >> (bit % 8)) & 3u);
}

float packed_scale(const Layout& L, const std::uint8_t* unit, std::size_t e) {
  std::uint16_t h;
  std::memcpy(&h, unit + L.code_bytes() + kPosBytes + 2 * e, 2);
  return f16_to_f32(h);
}

// One group of 16 rows, every token: the scalar twin.
void group_reference(const Layout& L, const std::uint8_t* group, const QuantizedActivations& xq, float* y) {
  for (std::size_t t = 0; t < static_cast<std::size_t>(xq.n_tokens); ++t) {
    const std::int8_t* x = xq.q.data() + t * L.in;
    const float* dx = xq.d.data() + t * (L.in / 32);
    for (std::size_t e = 0; e < kRows; ++e) {
      float acc = 0.0f;
      for (std::size_t u = 0; u < L.units(); ++u) {
        const std::uint8_t* unit = group + u * L.unit_bytes();
        const float dw = packed_scale(L, unit, e);
        for (std::size_t a = 0; a < 2; ++a) {  // the unit's two activation blocks
          std::int32_t s = 0;
          for (std::size_t j = 16 * a; j < 16 * a + 16; ++j) {
            s += packed_code(L, unit, e, j) * x[kUnitCols * u + packed_column(unit, L, e, j)];
          }
          acc = std::fma(static_cast<float>(s), dw * dx[2 * u + a], acc);
        }
      }
      y[t * L.out + e] = acc;
    }
  }
}

// T (<= 4) tokens' unsigned activations (q_x + 128) and signed ones (q_x), each [T][in], and
// their block scales.
struct Tokens {
  const std::uint8_t* xu;
  const std::int8_t* xs;
  const float* dx;
  std::size_t in;
};

#if defined(__x86_64__)  // AVX-512 VNNI + VBMI; other architectures run group_reference
// GCC 12 reports false -Wmaybe-uninitialized / -Wuninitialized inside its own 256 ↔ 512-bit
// casts (sparse_nm_q8.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define PEREGRINE_SPARSE_Q8_PACKED_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,f16c,fma")))

// Step s's shuffle indices: byte 4e + k = the column (0..7) within the step of row e's kept
// value k — its 2 position bits (vpmultishiftqb brings them to the byte's low bits, the rest
// masked off) plus 4 for the step's second group (k >= 2).
PEREGRINE_SPARSE_Q8_PACKED_TARGET __m512i step_indices(const std::uint8_t* pos) {
  // Word q of the vector (rows 2q, 2q + 1) reads word q mod 2 of the step, at bits 16·(q / 2) + 2i.
  const __m512i shifts = _mm512_set_epi64(0x3E3C3A3836343230, 0x3E3C3A3836343230, 0x2E2C2A2826242220,
                                          0x2E2C2A2826242220, 0x1E1C1A1816141210, 0x1E1C1A1816141210,
                                          0x0E0C0A0806040200, 0x0E0C0A0806040200);
  const __m512i bits = _mm512_multishift_epi64_epi8(shifts, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos))));
  return _mm512_ternarylogic_epi32(bits, _mm512_set1_epi8(3), _mm512_set1_epi32(0x04040000), 0xEA);  // (a & b) | c
}

// Step s's signed codes of the 16 rows (byte 4e + k).
template <bool kQ4>
PEREGRINE_SPARSE_Q8_PACKED_TARGET __m512i step_codes(const std::uint8_t* codes, std::size_t s) {
  if constexpr (!kQ4) return _mm512_loadu_si512(codes + 64 * s);
  const __m512i chunk = _mm512_loadu_si512(codes + 64 * (s % 4));
  const __m512i nibbles = s < 4 ? chunk : _mm512_srli_epi16(chunk, 4);
  return _mm512_sub_epi8(_mm512_and_si512(nibbles, _mm512_set1_epi8(0x0F)), _mm512_set1_epi8(8));
}

// Rows of group `g` for T tokens: acc[t] (16 lanes, one per row) over every unit.
template <bool kQ4, std::size_t T>
PEREGRINE_SPARSE_Q8_PACKED_TARGET void group_tokens(const Layout& L, const std::uint8_t* group, const Tokens& x, float* y,
                                                    std::size_t y_stride) {
  __m512 acc[T];
  for (std::size_t t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i ones = _mm512_set1_epi8(1);
  // Each unit prefetches the next group's same unit into L2, so that the next group's DRAM read
  // overlaps this group's compute (as quant_packed.cpp does; tinyllama's GEMVs, same run: one
  // token 1.08–1.21× → 1.18–1.32× dense packed Q4_0, eight 0.44–0.47× → 0.49–0.60×). Past the
  // matrix's end the addresses are hints, never dereferenced.
  const std::size_t ahead = L.units() * L.unit_bytes();
  for (std::size_t u = 0; u < L.units(); ++u) {
    const std::uint8_t* unit = group + u * L.unit_bytes();
    const std::uint8_t* pos = unit + L.code_bytes();
    for (std::size_t line = 0; line < L.unit_bytes(); line += 64) __builtin_prefetch(unit + ahead + line, 0, 2);
    __m512i dot[T][2], wsum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (std::size_t t = 0; t < T; ++t) dot[t][0] = dot[t][1] = _mm512_setzero_si512();
    for (std::size_t s = 0; s < kSteps; ++s) {
      const __m512i w = step_codes<kQ4>(unit, s);
      const __m512i idx = step_indices(pos + 16 * s);
      wsum[s / 4] = _mm512_dpbusd_epi32(wsum[s / 4], ones, w);
      for (std::size_t t = 0; t < T; ++t) {
        std::int64_t bytes;
        std::memcpy(&bytes, x.xu + t * x.in + kUnitCols * u + kStepCols * s, 8);
        const __m512i xg = _mm512_shuffle_epi8(_mm512_set1_epi64(bytes), idx);
        dot[t][s / 4] = _mm512_dpbusd_epi32(dot[t][s / 4], xg, w);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + kPosBytes)));
    for (std::size_t a = 0; a < 2; ++a) {
      const __m512i bias = _mm512_slli_epi32(wsum[a], 7);  // 128 · Σ w
      for (std::size_t t = 0; t < T; ++t) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x.dx[t * (x.in / 32) + 2 * u + a]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[t][a], bias)), scale, acc[t]);
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}
#pragma GCC diagnostic pop

// AVX2 (with F16C and FMA), 8 rows per vector: the group's 16 rows in two halves ("parts"),
// both in one pass over the unit for a single token, one after the other (the second reading
// the group from L1/L2) for several, so that the T tokens' sums fit the 16 registers.
#define PEREGRINE_SPARSE_Q8_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

// Part h's spread control: the 4 bytes of row e's dword (e = 8h + 4·lane + i) all read row e's
// position byte of the step, byte 8·(q mod 2) + 2·(q / 2) + e mod 2 (q = e / 2; position_bit).
constexpr std::array<std::uint8_t, 32> spread_control(std::size_t h) {
  std::array<std::uint8_t, 32> c{};
  for (std::size_t b = 0; b < 32; ++b) {
    const std::size_t e = 8 * h + 4 * (b / 16) + b % 16 / 4, q = e / 2;
    c[b] = static_cast<std::uint8_t>(8 * (q % 2) + 2 * (q / 2) + e % 2);
  }
  return c;
}
constexpr std::array<std::uint8_t, 32> kSpread[2] = {spread_control(0), spread_control(1)};

template <class Bytes>
PEREGRINE_SPARSE_Q8_AVX2_TARGET __m256i load32(const Bytes& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.data()));
}

// Step indices of part h (byte 4i + k of lane l: row 8h + 4l + i's kept value k's column 0..7
// in the step), from the step's 16 position bytes: each row's byte spread to its 4 bytes, byte k
// masked to its 2 bits (3 << 2k), the high nibble's pairs folded onto the low (a 16-bit shift),
// then a table maps 0..3 and 4, 8, 12 to the column 0..3, and k >= 2 adds 4.
PEREGRINE_SPARSE_Q8_AVX2_TARGET __m256i step_indices_avx2(const std::uint8_t* pos, __m256i spread) {
  const __m256i p = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos)));
  const __m256i m = _mm256_and_si256(_mm256_shuffle_epi8(p, spread), _mm256_set1_epi32(static_cast<int>(0xC0300C03u)));
  const __m256i nib = _mm256_and_si256(_mm256_or_si256(m, _mm256_srli_epi16(m, 4)), _mm256_set1_epi8(0x0F));
  const __m256i table = _mm256_setr_epi8(0, 1, 2, 3, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 3, 1, 0, 0, 0, 2, 0, 0, 0,
                                         3, 0, 0, 0);
  return _mm256_or_si256(_mm256_shuffle_epi8(table, nib), _mm256_set1_epi32(0x04040000));
}

// Step s's signed codes of part h (byte 4i + k of lane l: row 8h + 4l + i).
template <bool kQ4>
PEREGRINE_SPARSE_Q8_AVX2_TARGET __m256i step_codes_avx2(const std::uint8_t* codes, std::size_t s, std::size_t h) {
  if constexpr (!kQ4) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * s + 32 * h));
  const __m256i chunk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * (s % 4) + 32 * h));
  const __m256i nibbles = s < 4 ? chunk : _mm256_srli_epi16(chunk, 4);
  return _mm256_sub_epi8(_mm256_and_si256(nibbles, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

// The 8 activation bytes of step s of unit u, in every 64-bit lane.
template <class Byte>
PEREGRINE_SPARSE_Q8_AVX2_TARGET __m256i step_activations(const Byte* x, std::size_t u, std::size_t s) {
  std::int64_t bytes;
  std::memcpy(&bytes, x + kUnitCols * u + kStepCols * s, 8);
  return _mm256_set1_epi64x(bytes);
}

// Parts [h0, h0 + P) of group `g` for T tokens. Per activation block (4 steps) and row, the
// int32 sum of q_w · q_x: Q4 as vpmaddubsw of q_x + 128 (unsigned) with q_w (|q_w| <= 8: the 16-bit
// pairs, summed over the 4 steps, stay below 2^15) minus 128 · Σ q_w; Q8 as vpmaddubsw of |q_w|
// with q_x · sign(q_w) (ggml's trick: |q| <= 127 keeps each pair below 2^15), widened every step.
template <bool kQ4, std::size_t T, std::size_t P>
PEREGRINE_SPARSE_Q8_AVX2_TARGET void parts_tokens_avx2(const Layout& L, const std::uint8_t* group, const Tokens& x,
                                                       std::size_t h0, float* y, std::size_t y_stride) {
  __m256 acc[T][P];
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t h = 0; h < P; ++h) acc[t][h] = _mm256_setzero_ps();
  }
  const __m256i ones16 = _mm256_set1_epi16(1);
  const std::size_t ahead = L.units() * L.unit_bytes();  // the next group's same unit (hints)
  for (std::size_t u = 0; u < L.units(); ++u) {
    const std::uint8_t* unit = group + u * L.unit_bytes();
    const std::uint8_t* pos = unit + L.code_bytes();
    if (h0 == 0) {
      for (std::size_t line = 0; line < L.unit_bytes(); line += 64) __builtin_prefetch(unit + ahead + line, 0, 2);
    }
    for (std::size_t a = 0; a < 2; ++a) {  // the unit's two activation blocks, 4 steps each
      __m256i dot[T][P], wsum[P];
      for (std::size_t h = 0; h < P; ++h) {
        wsum[h] = _mm256_setzero_si256();
        for (std::size_t t = 0; t < T; ++t) dot[t][h] = _mm256_setzero_si256();
      }
      for (std::size_t s = 4 * a; s < 4 * a + 4; ++s) {
        for (std::size_t h = 0; h < P; ++h) {
          const __m256i w = step_codes_avx2<kQ4>(unit, s, h0 + h);
          const __m256i idx = step_indices_avx2(pos + 16 * s, load32(kSpread[h0 + h]));
          if constexpr (kQ4) {
            wsum[h] = _mm256_add_epi16(wsum[h], _mm256_maddubs_epi16(_mm256_set1_epi8(1), w));
            for (std::size_t t = 0; t < T; ++t) {
              const __m256i xg = _mm256_shuffle_epi8(step_activations(x.xu + t * x.in, u, s), idx);
              dot[t][h] = _mm256_add_epi16(dot[t][h], _mm256_maddubs_epi16(xg, w));
            }
          } else {
            const __m256i wabs = _mm256_abs_epi8(w);
            for (std::size_t t = 0; t < T; ++t) {
              const __m256i xg = _mm256_sign_epi8(_mm256_shuffle_epi8(step_activations(x.xs + t * x.in, u, s), idx), w);
              dot[t][h] = _mm256_add_epi32(dot[t][h], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, xg), ones16));
            }
          }
        }
      }
      for (std::size_t h = 0; h < P; ++h) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos + kPosBytes + 16 * (h0 + h))));
        const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(wsum[h], ones16), 7);  // 128 · Σ w (Q4)
        for (std::size_t t = 0; t < T; ++t) {
          const __m256i sum = kQ4 ? _mm256_sub_epi32(_mm256_madd_epi16(dot[t][h], ones16), bias) : dot[t][h];
          const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(x.dx[t * (x.in / 32) + 2 * u + a]));
          acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[t][h]);
        }
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t h = 0; h < P; ++h) _mm256_storeu_ps(y + t * y_stride + 8 * (h0 + h), acc[t][h]);
  }
}

// Rows of group `g` for T tokens at AVX2: one pass of both parts for a single token, two passes
// of one part each for several.
template <bool kQ4, std::size_t T>
void group_tokens_avx2(const Layout& L, const std::uint8_t* group, const Tokens& x, float* y, std::size_t y_stride) {
  if constexpr (T == 1) {
    parts_tokens_avx2<kQ4, T, 2>(L, group, x, 0, y, y_stride);
  } else {
    parts_tokens_avx2<kQ4, T, 1>(L, group, x, 0, y, y_stride);
    parts_tokens_avx2<kQ4, T, 1>(L, group, x, 1, y, y_stride);
  }
}
#endif  // __x86_64__

// One product's operands.
struct Operands {
  Layout L;
  const std::uint8_t* packed;
  Tokens x;
  std::size_t n_tokens;
  float* y;
  const std::uint8_t* group(std::size_t g) const { return packed + g * L.units() * L.unit_bytes(); }
};

#if defined(__x86_64__)
template <bool kQ4>
void groups(const Operands& op, std::size_t g0, std::size_t g1) {
  for_groups_in_token_chunks(g0, g1, op.n_tokens, [&]<std::size_t T>(std::size_t g, TokenChunk chunk) {
    const std::size_t t = chunk.first;
    const Tokens x{op.x.xu + t * op.x.in, op.x.xs + t * op.x.in, op.x.dx + t * (op.x.in / 32), op.x.in};
    float* y = op.y + t * op.L.out + g * kRows;
    if (isa_level() >= IsaLevel::kAvx512Vnni) {
      group_tokens<kQ4, T>(op.L, op.group(g), x, y, op.L.out);
    } else {
      group_tokens_avx2<kQ4, T>(op.L, op.group(g), x, y, op.L.out);
    }
  });
}
#endif  // __x86_64__

// The unsigned activations q_x + 128 of every token, once per distinct xq (kept by the caller).
void bias_activations(const QuantizedActivations& xq, std::vector<std::uint8_t>& xu) {
  xu.resize(xq.q.size());
  for (std::size_t i = 0; i < xq.q.size(); ++i) xu[i] = static_cast<std::uint8_t>(xq.q[i] + kBias);
}

}  // namespace

bool sparse_q8_packed_gemv_available() {
#if defined(__x86_64__)
  return isa_level() >= IsaLevel::kAvx2;  // AVX2 with F16C and FMA (Highway's AVX2 target)
#else
  return false;  // only the scalar group_reference (gemv_sparse_q8_packed still runs, with it)
#endif
}

bool sparse_q8_packable(const TensorView& w) {
  if ((w.dtype != DType::kQ4_0_S24 && w.dtype != DType::kQ8_0_S24) || w.shape.size() != 2) return false;
  const auto row_bytes = w.row_bytes();
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && out % kSparseQ8PackRows == 0 && in > 0 && in % static_cast<std::int64_t>(kUnitCols) == 0 && row_bytes &&
         w.nbytes == *row_bytes * static_cast<std::size_t>(out);
}

std::size_t sparse_q8_packed_bytes(const TensorView& w) {
  const Layout L(w);
  return L.out / kRows * L.units() * L.unit_bytes();
}

Status pack_sparse_q8(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!sparse_q8_packable(w)) {
    return invalid_argument("pack_sparse_q8: " + w.name +
                            " is not a 2-D q4_0_s24 / q8_0_s24 matrix of whole 16-row groups and 64-column blocks");
  }
  const std::size_t bytes = sparse_q8_packed_bytes(w);
  if (dst.size() < bytes) {
    return invalid_argument("pack_sparse_q8: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(bytes) + " of " + w.name);
  }
  const Layout L(w);
  std::memset(dst.data(), 0, bytes);
  const std::size_t row_bytes = *w.row_bytes();
  for (std::size_t r = 0; r < L.out; ++r) {
    const auto* row = static_cast<const std::uint8_t*>(w.data) + r * row_bytes;
    const std::uint8_t* mask = row + L.units() * L.stored_block_bytes();
    const std::size_t e = r % kRows;
    for (std::size_t u = 0; u < L.units(); ++u) {
      std::uint8_t* unit = dst.data() + (r / kRows * L.units() + u) * L.unit_bytes();
      const std::uint8_t* blk = row + u * L.stored_block_bytes();
      for (std::size_t c = 0; c < L.code_bytes() / 64; ++c) std::memcpy(unit + 64 * c + 4 * e, blk + 2 + 4 * c, 4);
      std::memcpy(unit + L.code_bytes() + kPosBytes + 2 * e, blk, 2);
      for (std::size_t j = 0; j < 16; ++j) {  // the unit's groups of 4 columns
        const std::size_t gi = 16 * u + j;
        const unsigned bits = (mask[gi / 2] >> (4 * (gi % 2))) & 0xfu;
        if (std::popcount(bits) != 2) {
          return invalid_argument("pack_sparse_q8: " + w.name + " row " + std::to_string(r) + " group " + std::to_string(gi) +
                                  " does not mark exactly 2 of 4 columns");
        }
        const unsigned first = static_cast<unsigned>(std::countr_zero(bits));
        const unsigned second = static_cast<unsigned>(std::countr_zero(bits & (bits - 1)));
        std::uint8_t* pos = unit + L.code_bytes() + 16 * (j / 2);
        for (const auto& [k, col] : {std::pair{2 * (j % 2), first}, std::pair{2 * (j % 2) + 1, second}}) {
          const std::size_t bit = position_bit(e, k);
          pos[bit / 8] = static_cast<std::uint8_t>(pos[bit / 8] | (col << (bit % 8)));
        }
      }
    }
  }
  return Status::ok();
}

void gemv_sparse_q8_packed(std::span<const SparseQ8Product> products, ThreadPool& pool, std::int64_t min_parallel_macs) {
  thread_local std::vector<std::vector<std::uint8_t>> biased;  // per distinct xq, reused between calls
  if (biased.size() < products.size()) biased.resize(products.size());
  std::vector<const QuantizedActivations*> inputs;
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0;
  std::size_t max_row_bytes = 0;
  for (const SparseQ8Product& p : products) {
    const auto at = std::find(inputs.begin(), inputs.end(), p.xq);
    std::vector<std::uint8_t>& xu = biased[static_cast<std::size_t>(at - inputs.begin())];
    if (at == inputs.end()) {
      inputs.push_back(p.xq);
      bias_activations(*p.xq, xu);
    }
    const Layout L(*p.w);
    ops.push_back({L, static_cast<const std::uint8_t*>(p.w->packed), {xu.data(), p.xq->q.data(), p.xq->d.data(), L.in},
                   static_cast<std::size_t>(p.xq->n_tokens), p.y.data()});
    outs.push_back(p.w->n_rows());
    macs += p.w->n_rows() * p.w->row_length() * p.xq->n_tokens;
    max_row_bytes = std::max(max_row_bytes, *p.w->row_bytes());
  }
  split_products_guided(outs, macs, max_row_bytes, kSparseQ8PackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          const auto g0 = static_cast<std::size_t>(begin / kSparseQ8PackRows);
                          const auto g1 = static_cast<std::size_t>(end / kSparseQ8PackRows);
#if defined(__x86_64__)
                          if (ops[p].L.q4) {
                            groups<true>(ops[p], g0, g1);
                          } else {
                            groups<false>(ops[p], g0, g1);
                          }
#else  // no SIMD kernel: the scalar twin, group by group
                          for (std::size_t g = g0; g < g1; ++g) {
                            group_reference(ops[p].L, ops[p].group(g), *products[p].xq, products[p].y.data() + g * kRows);
                          }
#endif
                        });
}

void gemv_sparse_q8_packed_reference(const SparseQ8Product& product) {
  const Layout L(*product.w);
  const auto* packed = static_cast<const std::uint8_t*>(product.w->packed);
  for (std::size_t g = 0; g < L.out / kRows; ++g) {
    group_reference(L, packed + g * L.units() * L.unit_bytes(), *product.xq, product.y.data() + g * kRows);
  }
}

}  // namespace peregrine

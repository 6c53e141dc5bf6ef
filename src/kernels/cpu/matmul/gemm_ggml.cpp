#include "peregrine/kernels/cpu/matmul/gemm_ggml.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "peregrine/kernels/cpu/isa.h"
#include "peregrine/kernels/cpu/matmul/ggml_unpack.h"
#include "kernels/cpu/count_dispatch.h"
#include "kernels/cpu/matmul/decode_prefetch.h"
#include "kernels/cpu/row_split.h"
#include "peregrine/quant/ggml_blocks.h"

#ifndef PEREGRINE_KERNELS_CPU_GEMM_GGML_OPERANDS
#define PEREGRINE_KERNELS_CPU_GEMM_GGML_OPERANDS
namespace peregrine::gemm_ggml_detail {

// The operands of one gemm_ggml call, shared by every target's kernel.
struct Operands {
  DType dtype;
  const std::uint8_t* w;     // [out, in] weight blocks
  std::size_t row_bytes;     // bytes of one weight row
  std::size_t group_bytes;   // bytes of one whole super-group
  std::int64_t groups;       // super-groups per row (the last may be partial: legacy formats)
  int last_blocks;           // blocks in the last super-group (8 or 1 when whole)
  const GgmlActivations* x;
  std::int64_t out;
  float* y;                  // [n_tokens, out]

  const std::uint8_t* group(std::int64_t row, std::int64_t g) const {
    return w + static_cast<std::size_t>(row) * row_bytes + static_cast<std::size_t>(g) * group_bytes;
  }
  int blocks_in(std::int64_t g) const { return g + 1 == groups ? last_blocks : 8; }
  bool whole(std::int64_t g) const { return blocks_in(g) == 8 || dtype_block_size(dtype) == 256; }
};

}  // namespace peregrine::gemm_ggml_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_ggml.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_ggml_detail::Operands;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2
// Block-header helpers shared by the AVX-512 and AVX2 kernels.

// An f16 field as f32 (F16C).
HWY_INLINE float half(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return _cvtsh_ss(v);
}

// The 8 low bytes v (the scales of 8 sub-blocks of 32) as 16 per-16 scales: byte s = v[s / 2].
HWY_INLINE __m128i pairs_of(__m128i v8) {
  return _mm_shuffle_epi8(v8, _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0));
}
HWY_INLINE __m128i pairs_of(std::uint64_t v8) { return pairs_of(_mm_cvtsi64_si128(static_cast<long long>(v8))); }

// Q4_K / Q5_K: the 8 6-bit scales and mins from the 12 packed bytes (scale_min_k4).
HWY_INLINE void k4_scales(const std::uint8_t* packed, std::uint64_t& scales, std::uint64_t& mins) {
  std::uint32_t lo, mid, hi;
  std::memcpy(&lo, packed, 4);
  std::memcpy(&mid, packed + 4, 4);
  std::memcpy(&hi, packed + 8, 4);
  const std::uint32_t sc_hi = (hi & 0x0f0f0f0fu) | ((lo >> 6) & 0x03030303u) << 4;
  const std::uint32_t m_hi = ((hi >> 4) & 0x0f0f0f0fu) | ((mid >> 6) & 0x03030303u) << 4;
  scales = (lo & 0x3f3f3f3fu) | std::uint64_t{sc_hi} << 32;
  mins = (mid & 0x3f3f3f3fu) | std::uint64_t{m_hi} << 32;
}

// Q3_K's 16 signed 6-bit scales (ggml::unpack_q3_k_scales, vectorized): low 4 bits from the
// nibbles of bytes 0..7 (low nibbles: scales 0..7, high: 8..15), high 2 bits from byte
// 8 + i % 4, bits 2·(i / 4); minus 32.
HWY_INLINE __m128i q3_k_scales(const ggml::BlockQ3_K& b) {
  std::uint64_t packed_low;
  std::uint32_t packed_high;
  std::memcpy(&packed_low, b.scales, 8);
  std::memcpy(&packed_high, b.scales + 8, 4);
  const __m128i nib = _mm_set1_epi8(0x0f);
  const __m128i lo8 = _mm_cvtsi64_si128(static_cast<long long>(packed_low));
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo8, nib), _mm_and_si128(_mm_srli_epi16(lo8, 4), nib));
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(packed_high)), _mm_set_epi32(6, 4, 2, 0)),
                                     _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC push_options
#pragma GCC target("avx512vnni")
namespace vnni {

// One super-group of one row, decoded: u[c] = the codes of values 64c..64c+63; a[c] lane l =
// a_s of the 16 values holding that int32 lane's 4 values (s = 4c + l/4); b lane s = b_s.
struct alignas(64) Decoded {
  __m512i u[4];
  __m512 a[4];
  __m512 b;
  __m512 a16;  // lane s = a_s (the prefill panels' scales)
};

// a[c] from the 16 per-16 scales.
HWY_INLINE void spread_scales(__m512 a16, __m512 b16, Decoded& out) {
  for (int c = 0; c < 4; ++c) {
    const __m512i index = _mm512_set_epi32(4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 2, 4 * c + 2,
                                           4 * c + 2, 4 * c + 2, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1,
                                           4 * c, 4 * c, 4 * c, 4 * c);
    out.a[c] = _mm512_permutexvar_ps(index, a16);
  }
  out.b = b16;
  out.a16 = a16;
}

// 16 signed bytes as 16 floats.
HWY_INLINE __m512 to_float(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

// Two legacy-ordered 16-byte nibble groups q0, q1 (values j: low nibble of byte j, j+16: high)
// as 64 codes: [lo(q0), hi(q0), lo(q1), hi(q1)].
HWY_INLINE __m512i nibbles_blockwise(__m128i q0, __m128i q1) {
  __m512i z = _mm512_castsi128_si512(q0);
  z = _mm512_inserti32x4(z, q0, 1);
  z = _mm512_inserti32x4(z, q1, 2);
  z = _mm512_inserti32x4(z, q1, 3);
  return _mm512_and_si512(_mm512_mask_srli_epi16(z, 0xFF00FF00u, z, 4), _mm512_set1_epi8(0x0f));
}

// A table of 16 bytes in every 128-bit lane, looked up by the nibble codes.
HWY_INLINE __m512i lookup16(const std::int8_t* table16, __m512i nibbles) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table16))), nibbles);
}

// IQ4's grid value + 128 of each nibble code.
HWY_INLINE __m512i iq4_codes(__m512i nibbles) {
  return _mm512_xor_si512(lookup16(ggml::kIq4nlValues, nibbles), _mm512_set1_epi8(static_cast<char>(0x80)));
}

// One K-quant / IQ4_XS super-block in integer-scaled form: w_i = d·sc_s·u_i + b_s for the 16
// values s (IQ4_XS: u = grid value + 128, b_s = −128·d·sc_s). u <= 241, so a vpdpbusd lane (4
// products against |q| <= 127) times sc_s summed over a sub-block stays below 2^24 (exact in f32).
struct alignas(64) IntScaled {
  __m512i u[4];        // codes of values 64c .. 64c+63
  __m128i sc;          // byte s: the signed integer scale sc_s of values 16s .. 16s+15
  float d;             // super-block scale
  __m512 b;            // lane s = b_s
};

// The low and high nibbles of 128 bytes in K-quant order (32 bytes per 64 values: low nibbles
// values 0..31, high 32..63), as the codes of 4 chunks of 64.
HWY_INLINE void k_nibbles(const std::uint8_t* qs, __m512i (&u)[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {  // bytes 64h.. : chunks 2h, 2h + 1
    const __m512i q = _mm512_loadu_si512(qs + 64 * h);
    const __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    u[2 * h] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    u[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
  }
}

// 32 bytes in both halves, each 32-bit lane rotated left by r_low (low half) / r_high (high
// half): a bit moved by less than 8 positions toward `to` lands in the same byte, so masking
// afterwards takes bit (to - r) of every byte to position `to`.
HWY_INLINE __m512i rotate_halves(__m512i both, int r_low, int r_high) {
  return _mm512_rolv_epi32(both, _mm512_inserti64x4(_mm512_set1_epi32(r_low & 31), _mm256_set1_epi32(r_high & 31), 1));
}

// a | (b & mask), one vpternlogd.
HWY_INLINE __m512i or_masked(__m512i a, __m512i b, __m512i mask) { return _mm512_ternarylogic_epi32(a, b, mask, 0xF8); }

template <int kBits>
HWY_INLINE void int_qk_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ4_K*>(block);  // Q5_K shares the head
  std::uint64_t scales, mins;
  k4_scales(b.scales, scales, mins);
  k_nibbles(block + (kBits == 5 ? sizeof(ggml::BlockQ5_K) - 128 : sizeof(ggml::BlockQ4_K) - 128), out.u);
  if constexpr (kBits == 5) {
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16)));
    for (int c = 0; c < 4; ++c) {  // qh bit 2c (values 64c .. +31), 2c + 1 (+32 .. +63) → bit 4
      out.u[c] = or_masked(out.u[c], rotate_halves(qh, 4 - 2 * c, 3 - 2 * c), _mm512_set1_epi8(16));
    }
  }
  out.sc = pairs_of(scales);
  out.d = half(b.d);
  out.b = _mm512_mul_ps(_mm512_set1_ps(-half(b.dmin)), to_float(pairs_of(mins)));
}

// 2-bit fields f0 and f0+1 of 32 bytes (Q2_K / Q3_K order): [(q >> 2f0) & 3, (q >> 2f0+2) & 3].
HWY_INLINE __m512i two_bit_fields(const std::uint8_t* qs, int f0) {
  const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
  const __m512i shifts = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * f0)),
                                            _mm256_set1_epi16(static_cast<short>(2 * f0 + 2)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(z, shifts), _mm512_set1_epi8(3));
}

HWY_INLINE void int_q2_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ2_K*>(block);
  for (int c = 0; c < 4; ++c) out.u[c] = two_bit_fields(b.qs + 32 * (c / 2), 2 * (c % 2));
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), low4 = _mm_set1_epi8(0x0f);
  out.sc = _mm_and_si128(sc, low4);
  out.d = half(b.d);
  out.b = _mm512_mul_ps(_mm512_set1_ps(-half(b.dmin)), to_float(_mm_and_si128(_mm_srli_epi16(sc, 4), low4)));
}

HWY_INLINE void int_q3_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ3_K*>(block);
  const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
  for (int c = 0; c < 4; ++c) {  // hmask bit 2c (values 64c .. +31), 2c + 1 (+32 .. +63) → bit 2
    const __m512i low = two_bit_fields(b.qs + 32 * (c / 2), 2 * (c % 2));
    out.u[c] = or_masked(low, rotate_halves(hm, 2 - 2 * c, 1 - 2 * c), _mm512_set1_epi8(4));
  }
  out.sc = q3_k_scales(b);
  out.d = half(b.d);
  out.b = _mm512_mul_ps(_mm512_set1_ps(-4.0f * out.d), to_float(out.sc));
}

HWY_INLINE void int_q6_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ6_K*>(block);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);  // values 0..63 (low nibbles), 64..127 (high)
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half)));
    for (int part = 0; part < 2; ++part) {  // chunk 2·half + part: quarters 2·part, 2·part + 1
      // The quarters' high bits, qh bits 4·part (+1) and 4·part + 2 (+1), → bits 4 and 5.
      const __m512i high = rotate_halves(qh, 4 - 4 * part, 2 - 4 * part);
      const __m512i low = part == 0 ? _mm512_and_si512(ql, low4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4);
      out.u[2 * half + part] = or_masked(low, high, _mm512_set1_epi8(0x30));
    }
  }
  out.sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  out.d = half(b.d);
  out.b = _mm512_mul_ps(_mm512_set1_ps(-32.0f * out.d), to_float(out.sc));
}

// IQ4_XS: the 8 6-bit scales minus 32 (ggml::iq4_xs_scale, vectorized) as 16 per-16 scales: low
// 4 bits from the nibbles of scales_l (scale 2i: low nibble of byte i, 2i + 1: high), high 2
// bits from scales_h, bits 2j.
HWY_INLINE __m128i iq4_xs_scales(const ggml::BlockIq4Xs& b) {
  std::uint32_t packed_low;
  std::memcpy(&packed_low, b.scales_l, 4);
  const __m128i bytes = _mm_cvtsi32_si128(static_cast<int>(packed_low)), nib = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(bytes, nib), _mm_and_si128(_mm_srli_epi16(bytes, 4), nib));
  const __m128i high16 = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<short>(b.scales_h[0] | b.scales_h[1] << 8)),
                                                      _mm_set_epi16(14, 12, 10, 8, 6, 4, 2, 0)),
                                       _mm_set1_epi16(3));
  const __m128i high = _mm_packus_epi16(high16, high16);
  return pairs_of(_mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32)));
}

// IQ4_XS as grid value + 128, b = −128·d·sc.
HWY_INLINE void int_iq4_xs(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockIq4Xs*>(block);
  for (int c = 0; c < 4; ++c) {
    const auto* q = reinterpret_cast<const __m128i*>(b.qs + 32 * c);
    out.u[c] = iq4_codes(nibbles_blockwise(_mm_loadu_si128(q), _mm_loadu_si128(q + 1)));
  }
  out.sc = iq4_xs_scales(b);
  out.d = half(b.d);
  out.b = _mm512_mul_ps(_mm512_set1_ps(-128.0f * out.d), to_float(out.sc));
}

// The f32 form of an integer-scaled super-block: a_s = d·sc_s.
template <void (*kInt)(const std::uint8_t*, IntScaled&)>
HWY_INLINE void from_int(const std::uint8_t* block, Decoded& out) {
  IntScaled k;
  kInt(block, k);
  for (int c = 0; c < 4; ++c) out.u[c] = k.u[c];
  spread_scales(_mm512_mul_ps(_mm512_set1_ps(k.d), to_float(k.sc)), k.b, out);
}

// IQ4_XS's f32 form: u = grid value + 128, b = −128·a.
HWY_INLINE void decode_iq4_xs(const std::uint8_t* block, Decoded& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockIq4Xs*>(block);
  for (int c = 0; c < 4; ++c) {
    const auto* q = reinterpret_cast<const __m128i*>(b.qs + 32 * c);
    out.u[c] = iq4_codes(nibbles_blockwise(_mm_loadu_si128(q), _mm_loadu_si128(q + 1)));
  }
  const __m512 a = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), to_float(iq4_xs_scales(b)));
  spread_scales(a, _mm512_mul_ps(_mm512_set1_ps(-128.0f), a), out);
}

// The f16 field `field(block k)` of blocks 0 .. count−1 as f32 lanes 0 .. 7 (absent blocks 0).
template <class Block, class Field>
HWY_INLINE __m512 block_halves(const Block* blk, int count, Field field) {
  __m128i v = _mm_setzero_si128();
  [&]<int... K>(std::integer_sequence<int, K...>) {
    const auto bits = [&](int k) {
      std::uint16_t h;
      std::memcpy(&h, field(blk[k]), 2);
      return static_cast<int>(h);
    };
    ((K < count ? void(v = _mm_insert_epi16(v, bits(K), K)) : void()), ...);
  }(std::make_integer_sequence<int, 8>{});
  return _mm512_castps256_ps512(_mm256_cvtph_ps(v));
}

// Legacy blocks of 32 (ggml-common.h block_q4_1 / block_q5_0 / block_q5_1 / block_iq4_nl),
// two per 64-value chunk: u = the nibble (+ 16 for Q5's qh bit; IQ4_NL: grid value + 128),
// a = d, b = m (Q4_1, Q5_1), −16·d (Q5_0), −128·d (IQ4_NL). kPartial: only the first n_blocks
// (1..7, a row's last super-group) are read, the rest decode as u = a = b = 0.
template <class Block, bool kPartial = false>
HWY_INLINE void decode_legacy_blocks(const std::uint8_t* group, int n_blocks, Decoded& out) {
  constexpr bool kHigh = requires(const Block& x) { x.qh; };
  constexpr bool kMin = requires(const Block& x) { x.m; };
  constexpr bool kIq4 = std::is_same_v<Block, ggml::BlockIq4Nl>;
  const auto* blk = reinterpret_cast<const Block*>(group);
  for (int c = 0; c < 4; ++c) {
    const int here = kPartial ? std::clamp(n_blocks - 2 * c, 0, 2) : 2;
    if (here == 0) {
      out.u[c] = _mm512_setzero_si512();
      continue;
    }
    const __m128i q1 = here == 2 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[2 * c + 1].qs)) : _mm_setzero_si128();
    __m512i u = nibbles_blockwise(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[2 * c].qs)), q1);
    if constexpr (kHigh) {  // qh bit j: value j of the block
      std::uint32_t h0, h1 = 0;
      std::memcpy(&h0, blk[2 * c].qh, 4);
      if (here == 2) std::memcpy(&h1, blk[2 * c + 1].qh, 4);
      u = _mm512_mask_add_epi8(u, h0 | static_cast<__mmask64>(h1) << 32, u, _mm512_set1_epi8(16));
    }
    if constexpr (kIq4) u = iq4_codes(u);
    out.u[c] = here == 2 ? u : _mm512_maskz_mov_epi8(0xffffffffull, u);
  }
  // Every block's f16 scale (and min) on its two 16-value lanes; absent blocks' lanes 0.
  const __m512i pairs = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const int count = kPartial ? n_blocks : 8;
  const __m512 a = _mm512_permutexvar_ps(pairs, block_halves(blk, count, [](const Block& x) { return x.d; }));
  __m512 b;
  if constexpr (kMin) {
    b = _mm512_permutexvar_ps(pairs, block_halves(blk, count, [](const Block& x) { return x.m; }));
  } else {
    b = _mm512_mul_ps(_mm512_set1_ps(kIq4 ? -128.0f : -16.0f), a);
  }
  spread_scales(a, b, out);
}

template <class Block>
HWY_INLINE void decode_legacy(const std::uint8_t* group, Decoded& out) {
  decode_legacy_blocks<Block>(group, 8, out);
}

// A legacy format's decoder: whole super-groups, and a row's partial last one, in SIMD.
template <class Block>
struct LegacyDecoder {
  static constexpr bool kInteger = false;
  static constexpr bool kAlwaysWhole = false;
  static HWY_INLINE void decode(const std::uint8_t* p, Decoded& out) { decode_legacy<Block>(p, out); }
  static HWY_INLINE void decode_part(const std::uint8_t* p, int n_blocks, Decoded& out) {
    decode_legacy_blocks<Block, true>(p, n_blocks, out);
  }
};

// A format's SIMD decoding of whole super-groups.
// kWhole: every super-group is whole (the K-quants and IQ4_XS: one block each).
template <void (*kDecode)(const std::uint8_t*, Decoded&), bool kWhole = true>
struct SimdDecoder {
  static constexpr bool kInteger = false;
  static constexpr bool kAlwaysWhole = kWhole;
  static HWY_INLINE void decode(const std::uint8_t* p, Decoded& out) { kDecode(p, out); }
};
// An integer-scaled format (the K-quants, IQ4_XS): decode_int for the integer GEMV, decode
// (by default from_int) for the f32 paths.
template <void (*kInt)(const std::uint8_t*, IntScaled&), void (*kDecode)(const std::uint8_t*, Decoded&) = from_int<kInt>>
struct IntDecoder : SimdDecoder<kDecode> {
  static constexpr bool kInteger = true;
  static HWY_INLINE void decode_int(const std::uint8_t* p, IntScaled& out) { kInt(p, out); }
};

// Super-group g of `row` decoded by D (a legacy row's partial last one: its 1..7 blocks).
template <class D>
HWY_INLINE void decode(const Operands& op, std::int64_t row, std::int64_t g, Decoded& out) {
  if constexpr (D::kAlwaysWhole) {
    D::decode(op.group(row, g), out);
  } else if (op.whole(g)) {
    D::decode(op.group(row, g), out);
  } else {
    D::decode_part(op.group(row, g), op.blocks_in(g), out);
  }
}

// acc[r][n] += the super-group's contribution for RM decoded rows × RN tokens at `token`.
template <int RM, int RN>
HWY_INLINE void group_step(const Operands& op, const Decoded* rows, std::int64_t g, std::int64_t token,
                           __m512 (&acc)[RM][RN]) {
  const GgmlActivations& x = *op.x;
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n) {
    const std::int8_t* q = x.q.data() + (token + n) * x.ld + g * kSuperGroup;
    const float* dx = x.dx.data() + (token + n) * x.ld / 4 + 64 * g;
    const __m512 s16 = _mm512_loadu_ps(x.sum16.data() + (token + n) * x.ld / 16 + 16 * g);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i xq = _mm512_loadu_si512(q + 64 * c);
      const __m512 xd = _mm512_loadu_ps(dx + 16 * c);
#pragma GCC unroll 4
      for (int r = 0; r < RM; ++r) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), rows[r].u[c], xq));
        acc[r][n] = _mm512_fmadd_ps(dot, _mm512_mul_ps(rows[r].a[c], xd), acc[r][n]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RM; ++r) acc[r][n] = _mm512_fmadd_ps(rows[r].b, s16, acc[r][n]);
  }
}

template <int RM, int RN>
HWY_INLINE void store(const Operands& op, __m512 (&acc)[RM][RN], std::int64_t row, std::int64_t token) {
  for (int r = 0; r < RM; ++r) {
    for (int n = 0; n < RN; ++n) op.y[(token + n) * op.out + row + r] = _mm512_reduce_add_ps(acc[r][n]);
  }
}

// The codes of a super-group with its sub-blocks in lanes: a 4 × 4 transpose of the 32-bit
// lanes within each 128-bit block, so that lane 4k + m of every chunk r holds values
// 64m + 16k + 4r .. +3, all of sub-block 4m + k (GgmlActivations::qt is laid out alike).
HWY_INLINE void subblocks_in_lanes(__m512i (&u)[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(u[0], u[1]), t1 = _mm512_unpackhi_epi32(u[0], u[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(u[2], u[3]), t3 = _mm512_unpackhi_epi32(u[2], u[3]);
  u[0] = _mm512_unpacklo_epi64(t0, t2);
  u[1] = _mm512_unpackhi_epi64(t0, t2);
  u[2] = _mm512_unpacklo_epi64(t1, t3);
  u[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Lane 4k + m of subblocks_in_lanes' int32 lanes sums sub-block 4m + k: the 16 sub-blocks'
// bytes (scales) in that order.
HWY_INLINE __m128i lane_order() { return _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

// Decode: one row at a time through all its super-groups (one sequential stream per thread),
// the decoded codes turned sub-blocks in lanes once, then per token 4 vpdpbusd sum each
// sub-block's 16 products in one int32 lane (exact), one conversion, one multiply by a_s times
// the activation scale (GgmlActivations::dx16t) and one FMA per super-group; the offsets b·sum16
// in a second accumulator. The row stream is prefetched ahead (decode_prefetch.h). Each token's
// sums run in the same order whatever the number of tokens, so a verification chain of up to 7
// rows reproduces one-row decode steps bit for bit (model/llama_model.cpp kRowsAsDecode). At
// batch 8 the panels below take over.
constexpr int kGemvTokens = 7;
static_assert(kGemvTokens <= kGgmlGemvMaxTokens, "GgmlActivations::qt is laid out up to kGgmlGemvMaxTokens tokens");

template <class D, int RN>
void gemv_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const GgmlActivations& x = *op.x;
  const __m512i scale_lanes = _mm512_cvtepu8_epi32(lane_order());
  for (std::int64_t row = row_begin; row < row_end; ++row) {
    __m512 acc[RN], offsets[RN];
    for (int n = 0; n < RN; ++n) acc[n] = offsets[n] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < op.groups; ++g) {
      prefetch_decode_stream<192>(op.group(row, g));
      Decoded d;
      decode<D>(op, row, g, d);
      subblocks_in_lanes(d.u);
      const __m512 a = _mm512_permutexvar_ps(scale_lanes, d.a16);
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) {
        const std::int8_t* q = x.qt.data() + n * x.ld + g * kSuperGroup;
        __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) sum = _mm512_dpbusd_epi32(sum, d.u[c], _mm512_loadu_si512(q + 64 * c));
        const __m512 scale = _mm512_mul_ps(a, _mm512_loadu_ps(x.dx16t.data() + n * x.ld / 16 + 16 * g));
        acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[n]);
        offsets[n] = _mm512_fmadd_ps(d.b, _mm512_loadu_ps(x.sum16.data() + n * x.ld / 16 + 16 * g), offsets[n]);
      }
    }
    for (int n = 0; n < RN; ++n) op.y[n * op.out + row] = _mm512_reduce_add_ps(_mm512_add_ps(acc[n], offsets[n]));
  }
}

// Decode with Q8_K-style activations (one scale per super-group): the codes turned sub-blocks
// in lanes once per row, then per token 4 vpdpbusd (64 values each) sum every sub-block in its
// own int32 lane, one vpmulld by the sub-block scales, one conversion and one FMA by d·dx per
// super-group (exact integers until then: ggml_vec_dot_q4_K_q8_K's arithmetic), the offsets
// b·sum16 in f32. Each token's sums run in the same order whatever the number of tokens, so
// verification rows reproduce one-row decode steps bit for bit. Up to kGemvIntTokens tokens
// (batched decode, verification rows, short prompt suffixes): the row panels' decoding only
// pays over more (qwen2.5-coder-1.5b Q4_K_M, 2 threads, Zen 5, tg32 tokens/s at --batch 4 / 6
// / 8: panels 47.7 / 64.5 / 78.2, a GEMV of this shape 110.4 / 97.0 / 96.7).
constexpr int kGemvIntTokens = 8;
static_assert(kGemvIntTokens <= kGgmlGemvMaxTokens, "GgmlActivations::qt is laid out up to kGgmlGemvMaxTokens tokens");

template <class D, int RN>
void gemv_int_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const GgmlActivations& x = *op.x;
  for (std::int64_t row = row_begin; row < row_end; ++row) {
    __m512 acc[RN], offsets[RN];
    for (int n = 0; n < RN; ++n) acc[n] = offsets[n] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < op.groups; ++g) {
      prefetch_decode_stream<192>(op.group(row, g));
      IntScaled k;
      D::decode_int(op.group(row, g), k);
      subblocks_in_lanes(k.u);
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(k.sc, lane_order()));
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) {
        const std::int8_t* q = x.qt.data() + n * x.ld + g * kSuperGroup;
        __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) sum = _mm512_dpbusd_epi32(sum, k.u[c], _mm512_loadu_si512(q + 64 * c));
        const float ddx = k.d * x.dx[static_cast<std::size_t>(n * x.ld / 4 + 64 * g)];
        acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(sum, sc)), _mm512_set1_ps(ddx), acc[n]);
        offsets[n] = _mm512_fmadd_ps(k.b, _mm512_loadu_ps(x.sum16.data() + n * x.ld / 16 + 16 * g), offsets[n]);
      }
    }
    for (int n = 0; n < RN; ++n) op.y[n * op.out + row] = _mm512_reduce_add_ps(_mm512_add_ps(acc[n], offsets[n]));
  }
}

#include "kernels/cpu/matmul/rows_in_lanes-inl.h"

// Prefill on 16-row panels in the rows-in-lanes layout (as gemm_quant's Q4_0 / Q8_0 panels):
// per super-group, w[4s + m] lane e = codes 16s + 4m .. +3 of row panel_row(e), a[s] / b[s]
// lane e = that row's a_s / b_s. One vpdpbusd multiplies 16 rows × 4 values by 4 activation
// bytes broadcast from memory; per 16 values and token, 4 of them share one conversion and two
// FMAs (a·dx, b·sum16), where the register tiles above spend three float ops per vpdpbusd.
struct alignas(64) PanelGroup {
  __m512i w[64];
  __m512 a[16], b[16];
};

// The integer-scaled panel of a K-quant / IQ4_XS super-group, for activation blocks of 256 (one
// dx per super-group and token): sc[s] lane e = the integer sub-block scale sc_s of row
// panel_row(e), d lane e = its super-block scale. Per 16 values and token the 4 vpdpbusd share
// one vpmulld by sc_s into an int32 sum over the super-group (exact), converted and scaled by
// d·dx once per super-group; the offsets b·sum16 stay f32.
struct alignas(64) IntPanelGroup {
  __m512i w[64];
  __m512i sc[16];
  __m512 b[16];
  __m512 d;
};

// w[4k + m] lane e = bytes 16k + 4m .. +3 of the 256 codes at rows[panel_row(e)] (16 code
// arrays, `stride` bytes apart).
HWY_INLINE void panel_codes(const std::uint8_t* rows, std::size_t stride, __m512i (&w)[64]) {
  for (int k = 0; k < 16; ++k) {  // values 16k .. 16k + 15
    __m512i z[4];
    for (int j = 0; j < 4; ++j) z[j] = four_rows(rows + (4 * j) * stride + 16 * k, stride);
    transpose4(z[0], z[1], z[2], z[3]);
    for (int m = 0; m < 4; ++m) w[4 * k + m] = z[m];
  }
}

// out[s] lane e = v[panel_row(e)][s] (16 values of each of 16 rows, 32-bit).
template <class T, class V>
HWY_INLINE void panel_lanes(const T (&v)[kPanelRows][16], V (&out)[16]) {
  static_assert(sizeof(T) == 4 && sizeof(V) == 64);
  for (int s = 0; s < 16; ++s) {
    alignas(64) T lanes[16];
    for (int e = 0; e < 16; ++e) lanes[e] = v[panel_row(e)][s];
    std::memcpy(&out[s], lanes, sizeof lanes);
  }
}

// Super-group g of the 16 rows at `row`, decoded and transposed into `out`.
template <class D>
void build_panel_group(const Operands& op, std::int64_t row, std::int64_t g, PanelGroup& out) {
  Decoded d[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) decode<D>(op, row + r, g, d[r]);
  static_assert(offsetof(Decoded, u) == 0);
  panel_codes(reinterpret_cast<const std::uint8_t*>(d), sizeof(Decoded), out.w);
  alignas(64) float a[kPanelRows][16], b[kPanelRows][16];
  for (int r = 0; r < kPanelRows; ++r) {
    _mm512_store_ps(a[r], d[r].a16);
    _mm512_store_ps(b[r], d[r].b);
  }
  panel_lanes(a, out.a);
  panel_lanes(b, out.b);
}

template <class D>
void build_panel_group(const Operands& op, std::int64_t row, std::int64_t g, IntPanelGroup& out) {
  IntScaled k[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) D::decode_int(op.group(row + r, g), k[r]);
  alignas(64) std::int32_t sc[kPanelRows][16];
  alignas(64) float b[kPanelRows][16], d[16];
  for (int r = 0; r < kPanelRows; ++r) {
    _mm512_store_si512(sc[r], _mm512_cvtepi8_epi32(k[r].sc));
    d[r] = k[r].d;
    _mm512_store_ps(b[r], k[r].b);
  }
  static_assert(offsetof(IntScaled, u) == 0);
  panel_codes(reinterpret_cast<const std::uint8_t*>(k), sizeof(IntScaled), out.w);
  panel_lanes(sc, out.sc);
  panel_lanes(b, out.b);
  alignas(64) float lanes[16];
  for (int e = 0; e < 16; ++e) lanes[e] = d[panel_row(e)];
  out.d = _mm512_load_ps(lanes);
}

// y[token .. token+RN, row .. row+16·P) from P panels ([groups][P] PanelGroups or
// IntPanelGroups).
template <class Panel, int P, int RN>
void ggml_panel_tile(const Operands& op, const Panel* panels, std::int64_t row, std::int64_t token) {
  constexpr bool kInt = std::is_same_v<Panel, IntPanelGroup>;
  const GgmlActivations& x = *op.x;
  __m512 acc[P][RN];
  __m512i isum[P][RN];  // kInt: Σ_s sc_s·dot_s over the current super-group
  for (int p = 0; p < P; ++p) {
    for (int n = 0; n < RN; ++n) {
      acc[p][n] = _mm512_setzero_ps();
      isum[p][n] = _mm512_setzero_si512();
    }
  }
  const std::int8_t* q[RN];
  const float *dx[RN], *s16[RN];
  for (int n = 0; n < RN; ++n) {  // token n's activations at super-group 0
    q[n] = x.q.data() + (token + n) * x.ld;
    dx[n] = x.dx.data() + (token + n) * x.ld / 4;
    s16[n] = x.sum16.data() + (token + n) * x.ld / 16;
  }
  for (std::int64_t g = 0; g < op.groups; ++g) {
    const Panel* pg = panels + g * P;
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) {
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) {
        const __m512 xs = _mm512_set1_ps(s16[n][s]);
        std::int32_t x4[4];
        std::memcpy(x4, q[n] + 16 * s, sizeof x4);
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) {
          // Two chains of two vpdpbusd each: half the latency of one chain of four.
          __m512i dot0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), pg[p].w[4 * s], _mm512_set1_epi32(x4[0]));
          __m512i dot1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), pg[p].w[4 * s + 2], _mm512_set1_epi32(x4[2]));
          dot0 = _mm512_dpbusd_epi32(dot0, pg[p].w[4 * s + 1], _mm512_set1_epi32(x4[1]));
          dot1 = _mm512_dpbusd_epi32(dot1, pg[p].w[4 * s + 3], _mm512_set1_epi32(x4[3]));
          if constexpr (kInt) {
            isum[p][n] = _mm512_add_epi32(isum[p][n], _mm512_mullo_epi32(_mm512_add_epi32(dot0, dot1), pg[p].sc[s]));
            // Sum in this order: left free, GCC reassociates the int32 sums and keeps every
            // dot of the super-group alive at once (spilled to the stack).
            asm("" : "+v"(isum[p][n]));
          } else {
            const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(dot0, dot1));
            acc[p][n] = _mm512_fmadd_ps(dot, _mm512_mul_ps(pg[p].a[s], _mm512_set1_ps(dx[n][4 * s])), acc[p][n]);
          }
          acc[p][n] = _mm512_fmadd_ps(pg[p].b[s], xs, acc[p][n]);
        }
      }
    }
    if constexpr (kInt) {  // one activation scale per super-group and token
      for (int n = 0; n < RN; ++n) {
        const __m512 xd = _mm512_set1_ps(dx[n][0]);
        for (int p = 0; p < P; ++p) {
          acc[p][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[p][n]), _mm512_mul_ps(pg[p].d, xd), acc[p][n]);
          isum[p][n] = _mm512_setzero_si512();
        }
      }
    }
    for (int n = 0; n < RN; ++n) {
      q[n] += kSuperGroup;
      dx[n] += kSuperGroup / 4;
      s16[n] += kSuperGroup / 16;
    }
  }
  const __m512i natural = _mm512_set_epi32(panel_row(15), panel_row(14), panel_row(13), panel_row(12), panel_row(11),
                                           panel_row(10), panel_row(9), panel_row(8), panel_row(7), panel_row(6),
                                           panel_row(5), panel_row(4), panel_row(3), panel_row(2), panel_row(1),
                                           panel_row(0));
  for (int n = 0; n < RN; ++n) {
    for (int p = 0; p < P; ++p) {
      _mm512_storeu_ps(op.y + (token + n) * op.out + row + kPanelRows * p, _mm512_permutexvar_ps(natural, acc[p][n]));
    }
  }
}

template <class Panel, int P, int RN = 4>
void any_ggml_panel_tile(int rn, const Operands& op, const Panel* panels, std::int64_t row, std::int64_t token) {
  if constexpr (RN > 1) {
    if (rn < RN) return any_ggml_panel_tile<Panel, P, RN - 1>(rn, op, panels, row, token);
  }
  ggml_panel_tile<Panel, P, RN>(op, panels, row, token);
}

// Rows [row, row + 16·P) for every token: the panels built once, then tiles of 4 tokens.
template <class D, class Panel, int P>
void ggml_panel_rows(const Operands& op, std::int64_t row) {
  thread_local hwy::AlignedFreeUniquePtr<Panel[]> panels;
  thread_local std::size_t capacity = 0;
  const auto needed = static_cast<std::size_t>(op.groups * P);
  if (capacity < needed) panels = hwy::AllocateAligned<Panel>(capacity = needed);
  for (std::int64_t g = 0; g < op.groups; ++g) {
    for (int p = 0; p < P; ++p) build_panel_group<D>(op, row + kPanelRows * p, g, panels[static_cast<std::size_t>(g * P + p)]);
  }
  const std::int64_t n_tokens = op.x->n_tokens;
  for (std::int64_t t = 0; t < n_tokens; t += 4) {
    any_ggml_panel_tile<Panel, P>(static_cast<int>(std::min<std::int64_t>(4, n_tokens - t)), op, panels.get(), row, t);
  }
}

// The panel form for D's rows: integer-scaled with one activation scale per super-group.
template <class D>
void panel_rows(const Operands& op, std::int64_t row, int p) {
  if constexpr (D::kInteger) {
    if (op.x->block == kSuperGroup) {
      return p == 2 ? ggml_panel_rows<D, IntPanelGroup, 2>(op, row) : ggml_panel_rows<D, IntPanelGroup, 1>(op, row);
    }
  }
  return p == 2 ? ggml_panel_rows<D, PanelGroup, 2>(op, row) : ggml_panel_rows<D, PanelGroup, 1>(op, row);
}

// Rows past the 16-row panels: kPanel rows decoded once into a per-thread buffer, then tiles of kPanel rows × up to
// 4 tokens over all tokens.
constexpr int kPanel = 4, kTileTokens = 4;

template <int RN>
void panel_tile(const Operands& op, const Decoded* panel, std::int64_t row, std::int64_t token) {
  __m512 acc[kPanel][RN];
  for (int r = 0; r < kPanel; ++r) {
    for (int n = 0; n < RN; ++n) acc[r][n] = _mm512_setzero_ps();
  }
  for (std::int64_t g = 0; g < op.groups; ++g) group_step<kPanel, RN>(op, panel + g * kPanel, g, token, acc);
  store<kPanel, RN>(op, acc, row, token);
}

template <int RN = kTileTokens>
void any_panel_tile(int rn, const Operands& op, const Decoded* panel, std::int64_t row, std::int64_t token) {
  if constexpr (RN > 1) {
    if (rn < RN) return any_panel_tile<RN - 1>(rn, op, panel, row, token);
  }
  panel_tile<RN>(op, panel, row, token);
}

template <class D>
void gemm_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t n_tokens = op.x->n_tokens;
  thread_local hwy::AlignedFreeUniquePtr<Decoded[]> panel;
  thread_local std::size_t capacity = 0;
  const auto needed = static_cast<std::size_t>(op.groups * kPanel);
  if (capacity < needed) panel = hwy::AllocateAligned<Decoded>(capacity = needed);
  std::int64_t row = row_begin;
  for (; row + 2 * kPanelRows <= row_end; row += 2 * kPanelRows) panel_rows<D>(op, row, 2);
  for (; row + kPanelRows <= row_end; row += kPanelRows) panel_rows<D>(op, row, 1);
  for (; row + kPanel <= row_end; row += kPanel) {
    for (std::int64_t g = 0; g < op.groups; ++g) {
      for (int r = 0; r < kPanel; ++r) decode<D>(op, row + r, g, panel[static_cast<std::size_t>(g * kPanel + r)]);
    }
    for (std::int64_t t = 0; t < n_tokens; t += kTileTokens) {
      any_panel_tile(static_cast<int>(std::min<std::int64_t>(kTileTokens, n_tokens - t)), op, panel.get(), row, t);
    }
  }
  // Rows past the last whole panel, one at a time.
  for (; row < row_end; ++row) {
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      __m512 acc[1][1] = {{_mm512_setzero_ps()}};
      for (std::int64_t g = 0; g < op.groups; ++g) {
        Decoded d;
        decode<D>(op, row, g, d);
        group_step<1, 1>(op, &d, g, t, acc);
      }
      store<1, 1>(op, acc, row, t);
    }
  }
}


template <class D>
void rows_with(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  if constexpr (D::kInteger) {
    if (op.x->block == kSuperGroup &&
        dispatch_count<1, kGemvIntTokens>(op.x->n_tokens, [&]<int RN>() { gemv_int_rows<D, RN>(op, row_begin, row_end); })) {
      return;
    }
  }
  if (dispatch_count<1, kGemvTokens>(op.x->n_tokens, [&]<int RN>() { gemv_rows<D, RN>(op, row_begin, row_end); })) return;
  gemm_rows<D>(op, row_begin, row_end);
}

}  // namespace vnni
#pragma GCC pop_options


void GemmGgmlRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  using namespace vnni;
  switch (op.dtype) {
    case DType::kQ4_K: return rows_with<IntDecoder<int_qk_k<4>>>(op, row_begin, row_end);
    case DType::kQ5_K: return rows_with<IntDecoder<int_qk_k<5>>>(op, row_begin, row_end);
    case DType::kQ6_K: return rows_with<IntDecoder<int_q6_k>>(op, row_begin, row_end);
    case DType::kQ3_K: return rows_with<IntDecoder<int_q3_k>>(op, row_begin, row_end);
    case DType::kQ2_K: return rows_with<IntDecoder<int_q2_k>>(op, row_begin, row_end);
    case DType::kIQ4_XS: return rows_with<IntDecoder<int_iq4_xs, decode_iq4_xs>>(op, row_begin, row_end);
    case DType::kIQ4_NL: return rows_with<LegacyDecoder<ggml::BlockIq4Nl>>(op, row_begin, row_end);
    case DType::kQ4_1: return rows_with<LegacyDecoder<ggml::BlockQ4_1>>(op, row_begin, row_end);
    case DType::kQ5_0: return rows_with<LegacyDecoder<ggml::BlockQ5_0>>(op, row_begin, row_end);
    case DType::kQ5_1: return rows_with<LegacyDecoder<ggml::BlockQ5_1>>(op, row_begin, row_end);
    default: {
      const std::string_view name = dtype_name(op.dtype);
      HWY_ABORT("gemm_ggml: %.*s is not a ggml block format", static_cast<int>(name.size()), name.data());
    }
  }
}

#endif

// Portable path (targets without their own kernels, and AVX2's K-quant rows against 32-value
// activation blocks): every super-group unpacked by the scalar unpack_super_group, then per 16
// values an int16 widening multiply-add dot product with each token.

std::int32_t Dot16(const std::uint8_t* u, const std::int8_t* q) {
  const hn::CappedTag<std::int16_t, 16> d16;
  const hn::Rebind<std::uint8_t, decltype(d16)> du8;
  const hn::Rebind<std::int8_t, decltype(d16)> d8;
  const hn::RepartitionToWide<decltype(d16)> d32;
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  for (std::size_t j = 0; j < 16; j += hn::Lanes(d16)) {
    sum0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(du8, u + j)),
                                         hn::PromoteTo(d16, hn::LoadU(d8, q + j)), sum0, sum1);
  }
  return hn::GetLane(hn::SumOfLanes(d32, hn::Add(sum0, sum1)));
}

void PortableRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const GgmlActivations& x = *op.x;
  std::vector<UnpackedSuperGroup> groups(static_cast<std::size_t>(op.groups));
  for (std::int64_t row = row_begin; row < row_end; ++row) {
    for (std::int64_t g = 0; g < op.groups; ++g) unpack_super_group(op.dtype, op.group(row, g), op.blocks_in(g), groups[g]);
    for (std::int64_t t = 0; t < x.n_tokens; ++t) {
      float acc = 0.0f;
      for (std::int64_t g = 0; g < op.groups; ++g) {
        const std::int8_t* q = x.q.data() + t * x.ld + g * kSuperGroup;
        const float* dx = x.dx.data() + t * x.ld / 4 + 64 * g;
        const float* s16 = x.sum16.data() + t * x.ld / 16 + 16 * g;
        for (int s = 0; s < 16; ++s) {
          const float dot = static_cast<float>(Dot16(groups[g].u + 16 * s, q + 16 * s));
          acc += groups[g].a[s] * dx[4 * s] * dot + groups[g].b[s] * s16[s];
        }
      }
      op.y[t * op.out + row] = acc;
    }
  }
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// AVX2's kernels also serve AVX-512 CPUs without VNNI and VBMI (Skylake-X, Cascade Lake); with
// AVX-VNNI, prefill's inner loop loses one of its three instructions per 32 values and token.
#define PEREGRINE_AVX2_KERNELS "kernels/cpu/matmul/gemm_ggml_avx2-inl.h"
#include "kernels/cpu/avx2_levels-inl.h"  // namespaces avx2, avx2_vnni
#undef PEREGRINE_AVX2_KERNELS

void GemmGgmlRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const bool done = isa_level() == IsaLevel::kAvx2Vnni ? avx2_vnni::rows(op, row_begin, row_end)
                                                       : avx2::rows(op, row_begin, row_end);
  if (!done) PortableRows(op, row_begin, row_end);
}
#elif HWY_TARGET != HWY_AVX3_DL
void GemmGgmlRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) { PortableRows(op, row_begin, row_end); }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemmGgmlRows);

gemm_ggml_detail::Operands operands(const TensorView& w, const GgmlActivations& xa, std::span<float> y) {
  const std::int64_t out = w.n_rows();
  const std::size_t row_bytes = out > 0 ? w.nbytes / static_cast<std::size_t>(out) : 0;
  const std::int64_t groups = (xa.in + kSuperGroup - 1) / kSuperGroup;
  const std::int64_t rest = xa.in % kSuperGroup;
  const int last_blocks = rest == 0 || dtype_block_size(w.dtype) == 256 ? 8 : static_cast<int>(rest / 32);
  return {w.dtype, static_cast<const std::uint8_t*>(w.data), row_bytes, super_group_bytes(w.dtype),
          groups, last_blocks, &xa, out, y.data()};
}

}  // namespace

bool is_ggml_gemm_dtype(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return true;
    default: return false;
  }
}

std::int64_t ggml_activation_block(DType t) {
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return kActivationBlockQ8_K;
    default: return kActivationBlockQ8_0;
  }
}

namespace {

// GgmlActivations::qt of one token from its `in` values q (a multiple of 256): per super-group,
// byte 64r + 16k + 4m + j = value 64m + 16k + 4r + j (swapping r and m is its own inverse).
void copy_subblocks_in_lanes(const std::int8_t* q, std::int64_t in, std::int8_t* qt) {
  for (std::int64_t g = 0; g < in; g += kSuperGroup) {
    for (int r = 0; r < 4; ++r) {
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 4; ++m) std::memcpy(qt + g + 64 * r + 16 * k + 4 * m, q + g + 64 * m + 16 * k + 4 * r, 4);
      }
    }
  }
}

}  // namespace

void prepare_ggml_activations(const QuantizedActivations& xq, DType weights, GgmlActivations& out) {
  out.n_tokens = xq.n_tokens;
  out.in = xq.in;
  out.ld = (xq.in + kSuperGroup - 1) / kSuperGroup * kSuperGroup;
  out.block = xq.block;
  const auto n = static_cast<std::size_t>(out.n_tokens * out.ld);
  out.q.assign(n, 0);
  const bool gemv = out.n_tokens <= kGgmlGemvMaxTokens;  // qt / dx16t: the decode GEMVs' layout only
  out.qt.assign(gemv ? n : 0, 0);
  out.dx16t.assign(gemv ? n / 16 : 0, 0.0f);
  out.dx.assign(n / 4, 0.0f);
  out.sum16.assign(n / 16, 0.0f);
  const std::int64_t blocks = xq.in / xq.block, per16 = xq.block / 16;
  // ggml's Q4_1 / Q5_1 dot products take the offset term from Q8_1's f16 block sum.
  const bool q8_1_sums = (weights == DType::kQ4_1 || weights == DType::kQ5_1) && xq.block == kActivationBlockQ8_0;
  for (std::int64_t t = 0; t < xq.n_tokens; ++t) {
    const std::int8_t* q = xq.q.data() + t * xq.in;
    std::memcpy(out.q.data() + t * out.ld, q, static_cast<std::size_t>(xq.in));
    for (std::int64_t k = 0; k < blocks; ++k) {
      const float d = xq.d[static_cast<std::size_t>(t * blocks + k)];
      // dx lanes: 4 values each, so the block's values [block·k, block·(k+1)) are lanes
      // [block·k / 4, ...) of the token's row of dx.
      float* dx = out.dx.data() + t * out.ld / 4 + k * xq.block / 4;
      std::fill(dx, dx + xq.block / 4, d);
      float* sum16 = out.sum16.data() + t * out.ld / 16 + per16 * k;
      if (q8_1_sums) {  // the block's offset weighs its whole sum: half on each 16 (exact)
        sum16[0] = sum16[1] = 0.5f * xq.s[static_cast<std::size_t>(t * blocks + k)];
        continue;
      }
      for (std::int64_t h = 0; h < per16; ++h) {
        std::int32_t s = 0;
        for (int j = 0; j < 16; ++j) s += q[xq.block * k + 16 * h + j];
        sum16[h] = d * static_cast<float>(s);
      }
    }
    if (!gemv) continue;
    copy_subblocks_in_lanes(out.q.data() + t * out.ld, out.ld, out.qt.data() + t * out.ld);
    for (std::int64_t lane = 0; lane < out.ld / 16; ++lane) {  // lane 16g + 4k + m: sub-block 4m + k of g
      const std::int64_t g = lane / 16, k = lane % 16 / 4, m = lane % 4;
      out.dx16t[static_cast<std::size_t>(t * out.ld / 16 + lane)] = out.dx[static_cast<std::size_t>(t * out.ld / 4 + 64 * g + 4 * (4 * m + k))];
    }
  }
}

void gemm_ggml(const TensorView& w, const GgmlActivations& xa, std::span<float> y, ThreadPool& pool,
               std::int64_t min_parallel_macs) {
  const auto op = operands(w, xa, y);
  if (xa.n_tokens == 0 || op.out == 0) return;
  const auto rows = [&](std::int64_t begin, std::int64_t end) { HWY_DYNAMIC_DISPATCH(GemmGgmlRows)(op, begin, end); };
  if (op.out * xa.in * xa.n_tokens < min_parallel_macs) return rows(0, op.out);
  split_rows_guided(op.out, op.row_bytes, xa.n_tokens >= 4 ? 32 : 4, pool, rows);  // prefill: whole panel pairs
}

void gemm_ggml_reference(const TensorView& w, const GgmlActivations& xa, std::span<float> y) {
  const auto op = operands(w, xa, y);
  UnpackedSuperGroup s;
  for (std::int64_t t = 0; t < xa.n_tokens; ++t) {
    for (std::int64_t row = 0; row < op.out; ++row) {
      float acc = 0.0f;
      for (std::int64_t g = 0; g < op.groups; ++g) {
        unpack_super_group(w.dtype, op.group(row, g), op.blocks_in(g), s);
        const std::int8_t* q = xa.q.data() + t * xa.ld + g * kSuperGroup;
        const float* dx = xa.dx.data() + t * xa.ld / 4 + 64 * g;
        for (int i16 = 0; i16 < 16; ++i16) {
          std::int32_t dot = 0;
          for (int j = 0; j < 16; ++j) dot += std::int32_t{s.u[16 * i16 + j]} * q[16 * i16 + j];
          acc += s.a[i16] * dx[4 * i16] * static_cast<float>(dot) +
                 s.b[i16] * xa.sum16[static_cast<std::size_t>(t * xa.ld / 16 + 16 * g + i16)];
        }
      }
      op.y[t * op.out + row] = acc;
    }
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE

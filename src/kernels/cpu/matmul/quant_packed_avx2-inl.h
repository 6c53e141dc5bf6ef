// quant_packed's AVX2 kernels (Haswell, Zen 1-3, Intel client cores; also Highway's AVX3
// target, which runs the same 256-bit code): included in quant_packed.cpp's HWY_AVX2 / HWY_AVX3
// section (namespace peregrine::HWY_NAMESPACE) by avx2_levels-inl.h, as namespace avx2 and on
// AVX2 again with AVX-VNNI (PEREGRINE_AVX_VNNI = 1) as avx2_vnni (IsaLevel::kAvx2Vnni). Each copy is the format's Codes and Block, then the group loops of
// quant_packed_groups-inl.h over them.

#if PEREGRINE_AVX_VNNI
namespace avx2_vnni {
#else
namespace avx2 {
#endif

// Two ymm hold a group block's 16 rows, rows 0-7 (half r = 0: bytes 0-31 of each 64-byte
// chunk) and rows 8-15 (r = 1: bytes 32-63), one int32 lane per row; without AVX-VNNI vpdpbusd
// is emulated by vpmaddubsw (unsigned × signed bytes, adjacent pairs summed to int16) and
// vpmaddwd by 1.
//
// Q4_0: u = the unsigned nibbles of values 4m..4m+3 of the 8 rows of half r. The products'
// int16 sums over all 8 m stay exact (16 products of at most 15·127: 30480 < 32767), so one
// vpmaddwd per token and half; the codes' offset 8 is taken off by the bias.
struct Q4_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ4_0;
  struct Chunk {
    __m256i u;
  };
  // Values 4m..4m+3 of half r's rows (the codes of m and m + 4 share a byte: low, high nibble).
  static HWY_INLINE Chunk at(const std::uint8_t* codes, int r, int m) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * (m % 4) + 32 * r));
    return {_mm256_and_si256(m < 4 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0f))};
  }
  // One token's dot as sums over m: s += u·x_m (int16 lanes, exact as above; x_m: the token's
  // activation bytes 4m..4m+3 as one word), then bias + the int32 sums of each row.
#if PEREGRINE_AVX_VNNI
  // AVX-VNNI: s += u·x_m in int32 lanes (vpdpbusd; as fast as vpmaddubsw + vpaddw on Zen 5).
  static HWY_INLINE __m256i step(__m256i s, const Chunk& w, std::int32_t x_m) {
    return _mm256_dpbusd_avx_epi32(s, w.u, _mm256_set1_epi32(x_m));
  }
  static HWY_INLINE __m256i finish(__m256i s, std::int32_t bias) { return _mm256_add_epi32(s, _mm256_set1_epi32(bias)); }
#else
  static HWY_INLINE __m256i step(__m256i s, const Chunk& w, std::int32_t x_m) {
    return _mm256_add_epi16(s, _mm256_maddubs_epi16(w.u, _mm256_set1_epi32(x_m)));
  }
  static HWY_INLINE __m256i finish(__m256i s, std::int32_t bias) {
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_set1_epi32(bias));
  }
#endif
};
#if PEREGRINE_AVX_VNNI
// Q8_0 with AVX-VNNI: vpdpbusd takes the packed u = q + 128 as it is (its int32 sums do not
// saturate), the bias -128·Σq_x takes the offset off, as AVX-512 VNNI does.
struct Q8_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ8_0;
  struct Chunk {
    __m256i u;
  };
  static HWY_INLINE Chunk at(const std::uint8_t* codes, int r, int m) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * m + 32 * r))};
  }
  static HWY_INLINE __m256i step(__m256i s, const Chunk& w, std::int32_t x_m) {
    return _mm256_dpbusd_avx_epi32(s, w.u, _mm256_set1_epi32(x_m));
  }
  static HWY_INLINE __m256i finish(__m256i s, std::int32_t bias) { return _mm256_add_epi32(s, _mm256_set1_epi32(bias)); }
};
#else
// Q8_0: the packed u = q + 128 would saturate vpmaddubsw (2·255·127 > 32767), so each product
// is |q| · (x with q's sign) (at most 2·128·127 = 32512 per pair), widened to int32 per m; the
// true Σ q·x needs no bias. 4 ops per m, token and half, as the alternatives would take: u's
// two nibbles as two Q4_0-like int16 sums (2 vpmaddubsw, 2 adds), or codes widened to int16
// once per block (2 vpmaddwd, 2 adds per token); not measured.
struct Q8_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ8_0;
  struct Chunk {
    __m256i a, q;  // |q|, q of values 4m..4m+3
  };
  static HWY_INLINE Chunk at(const std::uint8_t* codes, int r, int m) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * m + 32 * r)), flip);
    return {_mm256_abs_epi8(q), q};
  }
  static HWY_INLINE __m256i step(__m256i s, const Chunk& w, std::int32_t x_m) {
    const __m256i p = _mm256_maddubs_epi16(w.a, _mm256_sign_epi8(_mm256_set1_epi32(x_m), w.q));
    return _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static HWY_INLINE __m256i finish(__m256i s, std::int32_t /*bias*/) { return s; }
};
#endif

// One format's group block for T tokens: the 16 rows' outputs in two ymm per token (Acc), half
// by half: the tokens' int32 dots per row, m by m, each m's codes unpacked once for every token
// (token by token, GCC kept a whole half's unpacked codes on the stack and reloaded them per
// token: 3 loads per vpmaddubsw; tinyllama pp128 at AVX2, 2 threads, alternated: Q8_0 105 ->
// 121 tok/s, Q4_0 141 -> 147), then one f32 fused multiply-add by d_w (8 lanes) · d_x per token.
template <class Codes>
struct Block {
  static constexpr const quant_packed_detail::Format& kFormat = Codes::kFormat;
  struct Acc {
    __m256 half[2];
  };
  static HWY_INLINE Acc zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static HWY_INLINE void store(float* y, Acc acc) {
    _mm256_storeu_ps(y, acc.half[0]);
    _mm256_storeu_ps(y + 8, acc.half[1]);
  }
  template <int T>
  static HWY_INLINE void add(const std::uint8_t* codes, const Operands& op, std::int64_t b, Acc (&acc)[T]) {
#pragma GCC unroll 2
    for (int r = 0; r < 2; ++r) {
      // Several tokens: a compiler barrier, as GCC otherwise keeps every token's activation
      // broadcasts of half 0 for half 1, each stored to the stack and loaded back (1 store and
      // 1 load for 1 broadcast load saved; Q4_0 pp128 at AVX2 147 -> 186 tok/s, Q8_0 the same).
      if constexpr (T > 1) asm volatile("" ::: "memory");
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + kFormat.code_bytes + 16 * r)));
      __m256i s[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const typename Codes::Chunk w = Codes::at(codes, r, m);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          std::int32_t x_m;
          std::memcpy(&x_m, op.xq + (t * op.blocks + b) * 32 + 4 * m, sizeof x_m);
          s[t] = Codes::step(s[t], w, x_m);
          if constexpr (T > 1) asm("" : "+x"(s[t]));  // in this order: left free, GCC hoists every broadcast and spills
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const std::int64_t tb = t * op.blocks + b;
        const __m256i dot = Codes::finish(s[t], op.bias[tb]);
        acc[t].half[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(op.xd[tb])), acc[t].half[r]);
      }
    }
  }
};

// As AVX-512: the accumulators of 8 tokens (16 ymm) spill, but only once per block and half,
// while the unpacked codes serve twice as many tokens (tinyllama pp128 Q4_0, 2 threads, this
// Zen 4 capped at AVX2, alternated, tok/s: 4 tokens per pass 121.8 / 130.7, 8: 136.5 / 137.7).
constexpr int kChunkTokens = 8;
constexpr int kStreamTokens = 6;  // as AVX-512 (not measured on AVX2)

#include "kernels/cpu/matmul/quant_packed_groups-inl.h"

}  // namespace avx2 / avx2_vnni

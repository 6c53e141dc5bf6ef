#include "peregrine/kernels/cpu/matmul/quant_packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "kernels/cpu/count_dispatch.h"
#include "kernels/cpu/matmul/decode_prefetch.h"
#include "kernels/cpu/row_split.h"
#include "peregrine/quant/fp16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/quant_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef PEREGRINE_KERNELS_CPU_QUANT_PACKED_SHARED
#define PEREGRINE_KERNELS_CPU_QUANT_PACKED_SHARED
namespace peregrine::quant_packed_detail {

// One format's packed group block (16 rows × one block of 32 values): codes, then 16 f16 scales.
struct Format {
  std::size_t block_bytes;  // one stored block: f16 d, then the codes
  std::size_t code_bytes;   // the group block's codes; its scales follow
  std::int32_t offset;      // c: u = q + c, so Σ u·q_x = Σ q·q_x + c·Σ q_x
  constexpr std::size_t group_block_bytes() const { return 16 * block_bytes; }
};
constexpr Format kQ4_0{18, 256, 8};
constexpr Format kQ8_0{34, 512, 128};
inline const Format& format(DType dtype) { return dtype == DType::kQ8_0 ? kQ8_0 : kQ4_0; }

// The operands of one call, shared by every target's kernel.
struct Operands {
  DType dtype;
  const std::uint8_t* packed;
  std::int64_t blocks;                // per row
  const std::int8_t* xq;              // [n_tokens, in]
  const float* xd;                    // [n_tokens, blocks]
  const std::int32_t* bias;           // [n_tokens, blocks]: -c · Σ q_x of the block
  std::int64_t n_tokens, out;
  float* y;                           // [n_tokens, out]
  std::size_t group_bytes() const { return static_cast<std::size_t>(blocks) * format(dtype).group_block_bytes(); }
};

// Value j (0..31) of row e in a group block's codes: Q4_0's nibble minus 8, Q8_0's byte minus 128.
inline std::int32_t code(DType dtype, const std::uint8_t* codes, int e, int j) {
  if (dtype == DType::kQ8_0) return std::int32_t{codes[(j / 4) * 64 + e * 4 + j % 4]} - 128;
  const std::uint8_t byte = codes[((j / 4) % 4) * 64 + e * 4 + j % 4];
  return (j < 16 ? byte & 0x0f : byte >> 4) - 8;
}

// One packed group row by row: the scalar twin, and the kernel of targets below AVX2.
void GroupScalar(const Operands& op, std::int64_t group) {
  const Format& f = format(op.dtype);
  const std::uint8_t* g = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  for (std::int64_t t = 0; t < op.n_tokens; ++t) {
    for (int e = 0; e < 16; ++e) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < op.blocks; ++b) {
        const std::uint8_t* codes = g + b * f.group_block_bytes();
        const std::int8_t* x = op.xq + t * op.blocks * 32 + b * 32;
        std::int32_t dot = 0;
        for (int j = 0; j < 32; ++j) dot += code(op.dtype, codes, e, j) * std::int32_t{x[j]};
        std::uint16_t d;
        std::memcpy(&d, codes + f.code_bytes + 2 * e, 2);
        acc += (f16_to_f32(d) * op.xd[t * op.blocks + b]) * static_cast<float>(dot);
      }
      op.y[t * op.out + group * 16 + e] = acc;
    }
  }
}

}  // namespace peregrine::quant_packed_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
using quant_packed_detail::Operands;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#pragma GCC push_options
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni")

// AVX-512 VNNI: one zmm holds a group block's 16 rows (one int32 lane each).
//
// vpdpbusd's unsigned operands u[m] (values 4m..4m+3 of the 16 rows, m = 0..7) of one group block.
struct Q4_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ4_0;
  static HWY_INLINE void unpack(const std::uint8_t* codes, __m512i (&u)[8]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i q = _mm512_loadu_si512(codes + 64 * h);
      u[h] = _mm512_and_si512(q, low);
      u[h + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
    }
  }
};
struct Q8_0Codes {
  static constexpr const quant_packed_detail::Format& kFormat = quant_packed_detail::kQ8_0;
  static HWY_INLINE void unpack(const std::uint8_t* codes, __m512i (&u)[8]) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) u[m] = _mm512_loadu_si512(codes + 64 * m);
  }
};

// acc + d_w·d_x·(bias + Σ_m u[m]·x[m]) for one token's block (x its 32 activation bytes as 8
// words, bias = -c·Σq_x, d_x its scale): two int32 vpdpbusd chains, one f32 fused multiply-add.
HWY_INLINE __m512 AddBlockProduct(const __m512i (&u)[8], __m512 dw, const std::int32_t* x, std::int32_t bias, float xd,
                                  __m512 acc) {
  __m512i s0 = _mm512_set1_epi32(bias), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int h = 0; h < 4; ++h) {
    s0 = _mm512_dpbusd_epi32(s0, u[h], _mm512_set1_epi32(x[h]));
    s1 = _mm512_dpbusd_epi32(s1, u[h + 4], _mm512_set1_epi32(x[h + 4]));
  }
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc);
}

// One format's group block for T tokens: the 16 rows' outputs in one zmm per token (Acc); per
// block the codes unpacked into 8 vpdpbusd operands, each multiplied by 4 broadcast activation
// bytes of every token, two int32 chains per token starting from the block's -c·Σq_x bias, then
// one f32 fused multiply-add by d_w (16 lanes) · d_x.
template <class Codes>
struct Block {
  static constexpr const quant_packed_detail::Format& kFormat = Codes::kFormat;
  using Acc = __m512;
  static HWY_INLINE Acc zero() { return _mm512_setzero_ps(); }
  static HWY_INLINE void store(float* y, Acc acc) { _mm512_storeu_ps(y, acc); }
  // acc[t] += token t's products with block b (at `codes`) of the group.
  template <int T>
  static HWY_INLINE void add(const std::uint8_t* codes, const Operands& op, std::int64_t b, Acc (&acc)[T]) {
    __m512i u[8];
    Codes::unpack(codes, u);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + kFormat.code_bytes)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const std::int64_t tb = t * op.blocks + b;
      acc[t] = AddBlockProduct(u, dw, reinterpret_cast<const std::int32_t*>(op.xq + tb * 32), op.bias[tb], op.xd[tb], acc[t]);
    }
  }
};

// Tokens per pass of one group (the prefill), and the most tokens read as two streams.
constexpr int kChunkTokens = 8;
// 2..kStreamTokens tokens: two groups side by side, each its own stream prefetched 2 KiB ahead,
// every token at once (tinyllama bench --batch B -p 0 -n 16, 2 threads, a Xeon, 2026-11-28,
// alternated with the one-group kernel below, tok/s: Q4_0 2 sequences 84.3 / 78.5 / 83.7 / 76.0
// -> 85.4 / 97.6 / 84.2 / 94.3, 4: 141.9 / 133.2 -> 154.5 / 171.9, 6: 201.7 / 180.5 / 195.5 /
// 182.4 -> 204.2 / 219.0 / 200.4 / 214.2; Q8_0 2: 50.4 / 49.7 -> 54.1 / 52.5, 4: 86.8 / 85.7 ->
// 96.4 / 97.1, 6: 121.1 / 127.2 -> 132.5 / 130.9; at 8 sequences no better: Q4_0 229.7 / 216.3 /
// 223.7 / 214.9 -> 213.1 / 246.8 / 215.2 / 213.1).
constexpr int kStreamTokens = 6;

#else  // AVX2 (and AVX-512 without VNNI, which runs the same 256-bit code)

// AVX2: two ymm hold a group block's 16 rows, rows 0-7 (half r = 0: bytes 0-31 of each 64-byte
// chunk) and rows 8-15 (r = 1: bytes 32-63), one int32 lane per row; vpdpbusd is emulated by
// vpmaddubsw (unsigned × signed bytes, adjacent pairs summed to int16) and vpmaddwd by 1.
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
  static HWY_INLINE __m256i step(__m256i s, const Chunk& w, std::int32_t x_m) {
    return _mm256_add_epi16(s, _mm256_maddubs_epi16(w.u, _mm256_set1_epi32(x_m)));
  }
  static HWY_INLINE __m256i finish(__m256i s, std::int32_t bias) {
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_set1_epi32(bias));
  }
};
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

#endif

// 16 rows × RN (2..kChunkTokens) tokens of one group, block by block (Block<Codes>::add).
template <class Codes, int RN>
void GroupTile(const Operands& op, std::int64_t group) {
  using K = Block<Codes>;
  constexpr std::size_t kGroupBlockBytes = K::kFormat.group_block_bytes();
  const std::uint8_t* codes = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  typename K::Acc acc[RN];
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) acc[t] = K::zero();
  // With several tokens each block prefetches the next group's same block into L2, so that the
  // next group's DRAM read overlaps this group's compute; the hardware prefetcher alone left them
  // in series (Q4_0 tinyllama, same run: forwards of 4 / 8 / 16 / 24 / 32 rows 14 / 31 / 50 /
  // 62 / 76 -> 10 / 16 / 28 / 43 / 56 ms; one row unchanged at 9.1 ms). Past the matrix's end the
  // addresses are hints, never dereferenced.
  const std::size_t ahead = op.group_bytes();
  for (std::int64_t b = 0; b < op.blocks; ++b, codes += kGroupBlockBytes) {
    for (std::size_t line = 0; line < kGroupBlockBytes; line += 64) __builtin_prefetch(codes + ahead + line, 0, 2);
    K::template add<RN>(codes, op, b, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) K::store(op.y + t * op.out + group * 16, acc[t]);
}

// T tokens (1..kStreamTokens), S groups at once (group s is g + s·stride), each its own read
// stream prefetched kDecodePrefetchBytes ahead (decode_prefetch.h): per block each group's codes
// unpacked once and multiplied by every token's activations as in GroupTile.
template <class Codes, int S, int T>
void GroupStreams(const Operands& op, std::int64_t g, std::int64_t stride) {
  using K = Block<Codes>;
  constexpr std::size_t kGroupBlockBytes = K::kFormat.group_block_bytes();
  const std::uint8_t* codes[S];
  typename K::Acc acc[S][T];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
    codes[s] = op.packed + static_cast<std::size_t>(g + s * stride) * op.group_bytes();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[s][t] = K::zero();
  }
  for (std::int64_t b = 0; b < op.blocks; ++b) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const std::uint8_t* block = codes[s] + static_cast<std::size_t>(b) * kGroupBlockBytes;
      prefetch_decode_stream<kGroupBlockBytes>(block);
      K::template add<T>(block, op, b, acc[s]);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) K::store(op.y + t * op.out + (g + s * stride) * 16, acc[s][t]);
  }
}

// One group for up to kChunkTokens tokens of `op`.
template <class Codes>
void GroupTokens(const Operands& op, std::int64_t g) {
  if (op.n_tokens == 1) return GroupStreams<Codes, 1, 1>(op, g, 1);
  dispatch_count<2, kChunkTokens>(op.n_tokens, [&]<int kT>() { GroupTile<Codes, kT>(op, g); });
}

// Groups [g0, g1) of op's kT tokens as kStreams read streams (for_decode_streams).
template <int kStreams, int kT>
void StreamTiles(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for_decode_streams<kStreams>(g0, g1, [&]<int S>(std::int64_t g, std::int64_t stride) {
    if (op.dtype == DType::kQ8_0) return GroupStreams<Q8_0Codes, S, kT>(op, g, stride);
    GroupStreams<Q4_0Codes, S, kT>(op, g, stride);
  });
}

// One token: kDecodeStreams groups side by side (decode_prefetch.h); 2..kStreamTokens: two.
// More: each group for all tokens, kChunkTokens at a time: the group's weights (16 rows) stay in
// L1/L2 between the token chunks, so DRAM sees them once.
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  if (op.n_tokens == 1) return StreamTiles<kDecodeStreams, 1>(op, g0, g1);
  if (op.n_tokens <= kStreamTokens) {
    dispatch_count<2, kStreamTokens>(op.n_tokens, [&]<int kT>() { StreamTiles<2, kT>(op, g0, g1); });
    return;
  }
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t t = 0; t < op.n_tokens; t += kChunkTokens) {
      Operands chunk = op;
      chunk.xq += t * op.blocks * 32;
      chunk.xd += t * op.blocks;
      chunk.bias += t * op.blocks;
      chunk.y += t * op.out;
      chunk.n_tokens = std::min<std::int64_t>(kChunkTokens, op.n_tokens - t);
      if (op.dtype == DType::kQ8_0) {
        GroupTokens<Q8_0Codes>(chunk, g);
      } else {
        GroupTokens<Q4_0Codes>(chunk, g);
      }
    }
  }
}
bool QuantHasSimdKernel() { return true; }

#pragma GCC pop_options
#else
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for (std::int64_t g = g0; g < g1; ++g) quant_packed_detail::GroupScalar(op, g);
}
bool QuantHasSimdKernel() { return false; }
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemvGroups);
HWY_EXPORT(QuantHasSimdKernel);

using quant_packed_detail::Format;
using quant_packed_detail::Operands;

// Per token and block of `xq`, -c · Σ q_x: the bias that takes off the codes' offset c.
std::vector<std::int32_t> activation_biases(const QuantizedActivations& xq, std::int32_t c) {
  std::vector<std::int32_t> bias(static_cast<std::size_t>(xq.n_tokens * (xq.in / 32)));
  for (std::size_t i = 0; i < bias.size(); ++i) {
    std::int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += xq.q[i * 32 + static_cast<std::size_t>(j)];
    bias[i] = -c * sum;
  }
  return bias;
}

Operands operands(const PackedProduct& p, const std::vector<std::int32_t>& bias) {
  return {p.dtype, p.packed, p.xq->in / 32, p.xq->q.data(), p.xq->d.data(), bias.data(), p.xq->n_tokens, p.out, p.y.data()};
}

// Block b of stored row e (d, then the codes) into group block `dst` of its group.
void pack_block(DType dtype, const std::uint8_t* block, int e, std::uint8_t* dst) {
  const Format& f = quant_packed_detail::format(dtype);
  std::memcpy(dst + f.code_bytes + 2 * e, block, 2);
  for (int m = 0; m < 8; ++m) {
    for (int k = 0; k < 4; ++k) {
      const int j = 4 * m + k;
      if (dtype == DType::kQ8_0) {
        dst[m * 64 + e * 4 + k] = static_cast<std::uint8_t>(block[2 + j] ^ 0x80);
      } else if (m < 4) {  // Q4_0 qs[j] = value j | value j + 16 << 4: byte j holds both
        dst[m * 64 + e * 4 + k] = block[2 + j];
      }
    }
  }
}

}  // namespace

bool quant_packed_gemv_available() { return HWY_DYNAMIC_DISPATCH(QuantHasSimdKernel)(); }

bool quant_packable(const TensorView& w) {
  if ((w.dtype != DType::kQ4_0 && w.dtype != DType::kQ8_0) || w.shape.size() != 2) return false;
  const std::int64_t out = w.shape[0], in = w.shape[1];
  return out > 0 && out % kQuantPackRows == 0 && in > 0 && in % 32 == 0 &&
         w.nbytes == static_cast<std::size_t>(out * (in / 32)) * quant_packed_detail::format(w.dtype).block_bytes;
}

Status pack_quant(const TensorView& w, std::span<std::uint8_t> dst) {
  if (!quant_packable(w)) {
    return invalid_argument("pack_quant: " + w.name + " is not a 2-D Q4_0 or Q8_0 matrix of whole 16-row groups");
  }
  if (dst.size() < w.nbytes) {
    return invalid_argument("pack_quant: " + std::to_string(dst.size()) + " bytes cannot hold the " +
                            std::to_string(w.nbytes) + " of " + w.name);
  }
  const Format& f = quant_packed_detail::format(w.dtype);
  const std::int64_t out = w.shape[0], blocks = w.shape[1] / 32;
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  const std::size_t row_bytes = static_cast<std::size_t>(blocks) * f.block_bytes;
  for (std::int64_t g = 0; g < out / kQuantPackRows; ++g) {
    std::uint8_t* group = dst.data() + static_cast<std::size_t>(g) * 16 * row_bytes;
    for (int e = 0; e < 16; ++e) {
      const std::uint8_t* row = src + static_cast<std::size_t>(g * 16 + e) * row_bytes;
      for (std::int64_t b = 0; b < blocks; ++b) {
        pack_block(w.dtype, row + b * f.block_bytes, e, group + b * f.group_block_bytes());
      }
    }
  }
  return Status::ok();
}

void gemv_quant_packed(std::span<const PackedProduct> products, ThreadPool& pool, std::int64_t min_parallel_macs) {
  // One bias per distinct input and offset c.
  std::map<std::pair<const QuantizedActivations*, std::int32_t>, std::vector<std::int32_t>> biases;
  std::vector<Operands> ops;
  std::vector<std::int64_t> outs;
  std::int64_t macs = 0;
  std::size_t max_row_bytes = 0;
  for (const PackedProduct& p : products) {
    const Format& f = quant_packed_detail::format(p.dtype);
    auto [it, added] = biases.try_emplace({p.xq, f.offset});
    if (added) it->second = activation_biases(*p.xq, f.offset);
    ops.push_back(operands(p, it->second));
    outs.push_back(p.out);
    macs += p.out * p.xq->in * p.xq->n_tokens;
    max_row_bytes = std::max(max_row_bytes, static_cast<std::size_t>(p.xq->in / 32) * f.block_bytes);
  }
  split_products_guided(outs, macs, max_row_bytes, kQuantPackRows, pool, min_parallel_macs,
                        [&](std::size_t p, std::int64_t begin, std::int64_t end) {
                          HWY_DYNAMIC_DISPATCH(GemvGroups)(ops[p], begin / kQuantPackRows, end / kQuantPackRows);
                        });
}

void gemv_quant_packed_reference(const PackedProduct& product) {
  const std::vector<std::int32_t> bias = activation_biases(*product.xq, quant_packed_detail::format(product.dtype).offset);
  const Operands op = operands(product, bias);
  for (std::int64_t g = 0; g < product.out / kQuantPackRows; ++g) quant_packed_detail::GroupScalar(op, g);
}

}  // namespace peregrine
#endif  // HWY_ONCE

#include "peregrine/kernels/cpu/matmul/gemm_quant.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/row_split.h"
#include "peregrine/kernels/cpu/matmul/quant_packed.h"
#include "peregrine/quant/unpack_int8.h"

#ifndef PEREGRINE_KERNELS_CPU_GEMM_QUANT_OPERANDS
#define PEREGRINE_KERNELS_CPU_GEMM_QUANT_OPERANDS
namespace peregrine::gemm_quant_detail {

// The operands of one gemm_quant call, shared by every target's kernel.
struct Operands {
  DType dtype;
  const std::uint8_t* w;    // [out, in] weight blocks
  std::size_t row_bytes;    // bytes of one weight row
  const std::int8_t* xq;    // [n_tokens, in] activation values
  const float* xd;          // [n_tokens, blocks] activation scales
  std::int64_t in, blocks;  // values and blocks per row
  std::int64_t n_tokens, out;
  float* y;                 // [n_tokens, out]
};

}  // namespace peregrine::gemm_quant_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_quant.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_quant_detail::Operands;

#if HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI register tiles. vpdpbusd multiplies 64 unsigned × signed byte pairs and adds each
// aligned group of four products into one of 16 int32 lanes. A zmm holds a pair of blocks (64
// values): block j of the pair is bytes 32j..32j+31, i.e. int32 lanes 8j..8j+7. A row with an odd
// number of blocks ends with a single block (kPair = false), the upper half zero.
// Highway 1.0.3's AVX3_DL target string lacks avx512vnni (its CPU check requires it): add it.
#pragma GCC push_options
#pragma GCC target("avx512vnni")
namespace vnni {

// Lanes 0-7 ← s[0], lanes 8-15 ← s[1]: the scales of a block pair over their blocks' lanes.
HWY_INLINE __m512 spread_pair(__m128 s) {
  const __m512i index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(s));
}

// A byte or word permutation as a vector of indices, index(i) for element i.
template <typename T, class Index>
HWY_INLINE __m512i permutation(Index index) {
  alignas(64) T table[64 / sizeof(T)];
  for (std::size_t i = 0; i < 64 / sizeof(T); ++i) table[i] = static_cast<T>(index(i));
  return _mm512_load_si512(table);
}

// The f16 scales d0, d1 of a block pair, at 16-bit words 0 and kWord1 of `head` (the pair's
// first bytes), converted and spread over their blocks' lanes.
template <int kWord1>
HWY_INLINE __m512 weight_scales(__m512i head) {
  const __m512i index = permutation<std::int16_t>([](std::size_t i) { return i < 8 ? 0 : kWord1; });
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(index, head)));
}

// -m × (sum of the four signed bytes of each int32 lane of q).
HWY_INLINE __m512i neg_lane_sums(__m512i q, char m) {
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(m), q));
}

template <bool kPair>
HWY_INLINE __m512i activation_values(const std::int8_t* q) {
  if constexpr (kPair) return _mm512_loadu_si512(q);
  return _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q);
}

template <bool kPair>
HWY_INLINE __m512 activation_scales(const float* d) {
  return spread_pair(_mm_maskz_loadu_ps(kPair ? 3 : 1, d));
}

// Q8_0 weights are signed, so the activations are vpdpbusd's unsigned operand, offset by 128
// (u = q_x xor 0x80 = q_x + 128); bias = -128 × Σ q_w per lane cancels the offset.
struct Q8_0Tile {
  static constexpr std::size_t kBlockBytes = 34;
  struct Weights {
    __m512i q, bias;
    __m512 d;
  };
  struct Activations {
    __m512i u;
    __m512 d;
  };
  template <bool kPair>
  static HWY_INLINE Weights load_weights(const std::uint8_t* block) {
    // Bytes 0..63 of the pair hold d0 (word 0) and d1 (word 17); a single block only d0.
    const __m512i head = kPair ? _mm512_loadu_si512(block) : _mm512_maskz_loadu_epi8(0x3, block);
    __m512i q = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)));
    if constexpr (kPair) {
      q = _mm512_inserti64x4(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kBlockBytes + 2)), 1);
    }
    return {q, neg_lane_sums(q, static_cast<char>(0x80)), weight_scales<17>(head)};
  }
  template <bool kPair>
  static HWY_INLINE Activations load_activations(const std::int8_t* q, const float* d) {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    return {_mm512_xor_si512(activation_values<kPair>(q), offset), activation_scales<kPair>(d)};
  }
  static HWY_INLINE __m512i dot(const Weights& w, const Activations& x) {
    return _mm512_dpbusd_epi32(w.bias, x.u, w.q);
  }
};

// Q4_0 nibbles (0..15) are vpdpbusd's unsigned operand against the signed activations;
// bias = -8 × Σ q_x per lane applies the format's -8 offset.
struct Q4_0Tile {
  static constexpr std::size_t kBlockBytes = 18;
  struct Weights {
    __m512i u;
    __m512 d;
  };
  struct Activations {
    __m512i q, bias;
    __m512 d;
  };
  template <bool kPair>
  static HWY_INLINE Weights load_weights(const std::uint8_t* block) {
    // A pair: bytes 0..31 (d0 @0, qs0 @2..17, d1 @18 = word 9) and qs1 (bytes 20..35) at 32..47.
    // A single block: its 18 bytes, the rest zero. (Plain loads stay inside the pair; a masked
    // load is slow when it misses the cache, so only the single block uses one.)
    __m512i bytes;
    if constexpr (kPair) {
      bytes = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
      bytes = _mm512_inserti32x4(bytes, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kBlockBytes + 2)), 2);
    } else {
      bytes = _mm512_maskz_loadu_epi8((1ull << kBlockBytes) - 1, block);
    }
    // 128-bit lanes [qs0, qs0, qs1, qs1], lanes 1 and 3 shifted down a nibble, & 0x0f:
    // [values 0-15, 16-31 of block 0, 0-15, 16-31 of block 1].
    const __m512i index = permutation<std::int8_t>([](std::size_t i) { return (i < 32 ? 2 : 32) + i % 16; });
    const __m512i qs = _mm512_permutexvar_epi8(index, bytes);
    const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(qs, 0xFF00FF00u, qs, 4), _mm512_set1_epi8(0x0f));
    return {u, weight_scales<9>(bytes)};
  }
  template <bool kPair>
  static HWY_INLINE Activations load_activations(const std::int8_t* q, const float* d) {
    const __m512i v = activation_values<kPair>(q);
    return {v, neg_lane_sums(v, 8), activation_scales<kPair>(d)};
  }
  static HWY_INLINE __m512i dot(const Weights& w, const Activations& x) {
    return _mm512_dpbusd_epi32(x.bias, w.u, x.q);
  }
};

// Where a tile reads its tokens' activations: per token, a cursor whose at<kPair>(b) gives the
// activations of block pair b (b even; the final single block when !kPair). GEMM tiles convert
// them on the fly (once per tile step, shared by the tile's 4 rows) ...
template <class F>
struct StreamedActivations {
  struct Token {
    const std::int8_t* q;
    const float* d;
    template <bool kPair>
    HWY_INLINE typename F::Activations at(std::int64_t b) const {
      return F::template load_activations<kPair>(q + b * kQuantBlock, d + b);
    }
  };
  const Operands& op;
  Token token(std::int64_t t) const { return {op.xq + t * op.in, op.xd + t * op.blocks}; }
};

// ... decode's one-row tiles read them converted once per row range (per row, converting
// would cost a third of the Q4_0 GEMV's vector instructions).
template <class F>
struct PreparedActivations {
  struct Token {
    const typename F::Activations* x;
    template <bool kPair>
    HWY_INLINE const typename F::Activations& at(std::int64_t b) const { return x[static_cast<std::size_t>(b) / 2]; }
  };
  // [n_tokens, pairs], a single last block as a pair. (Highway's allocator: std::vector
  // aligned these zmm structs to only 16 bytes when the build's baseline lacks AVX-512.)
  hwy::AlignedFreeUniquePtr<typename F::Activations[]> x;
  std::int64_t pairs;

  explicit PreparedActivations(const Operands& op) : pairs((op.blocks + 1) / 2) {
    x = hwy::AllocateAligned<typename F::Activations>(static_cast<std::size_t>(op.n_tokens * pairs));
    const StreamedActivations<F> streamed{op};
    for (std::int64_t t = 0; t < op.n_tokens; ++t) {
      const auto cursor = streamed.token(t);
      for (std::int64_t b = 0; b < op.blocks; b += 2) {
        x[static_cast<std::size_t>(t * pairs + b / 2)] =
            b + 1 < op.blocks ? cursor.template at<true>(b) : cursor.template at<false>(b);
      }
    }
  }
  Token token(std::int64_t t) const { return {x.get() + t * pairs}; }
};

// One block pair (or the final single block) b of an RM × RN tile whose rows start at w: each
// weight pair is unpacked once and used for all RN tokens.
template <class F, int RM, int RN, bool kPair, class Token>
HWY_INLINE void tile_step(const Operands& op, const std::uint8_t* w, const Token (&tokens)[RN],
                          std::int64_t b, __m512 (&acc)[RM][RN]) {
  typename F::Weights wr[RM];
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) wr[r] = F::template load_weights<kPair>(w + r * op.row_bytes + b * F::kBlockBytes);
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) {
    const auto& x = tokens[n].template at<kPair>(b);
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(F::dot(wr[r], x));
      acc[r][n] = _mm512_fmadd_ps(dot, _mm512_mul_ps(wr[r].d, x.d), acc[r][n]);
    }
  }
}

// y[token .. token+RN, row .. row+RM] over the whole row length. Small tiles alternate between
// two sets of accumulators, so that consecutive block pairs do not wait on one FMA's latency.
template <class F, int RM, int RN, class X>
void tile(const Operands& op, const X& x, std::int64_t row, std::int64_t token) {
  constexpr int kChains = RM * RN >= 4 ? 1 : 2;
  __m512 acc[kChains][RM][RN];
#pragma GCC unroll 8
  for (int c = 0; c < kChains; ++c) {
#pragma GCC unroll 8
    for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) acc[c][r][n] = _mm512_setzero_ps();
    }
  }
  typename X::Token tokens[RN];
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) tokens[n] = x.token(token + n);
  const std::uint8_t* w = op.w + static_cast<std::size_t>(row) * op.row_bytes;
  std::int64_t b = 0;
  for (; b + 2 * kChains <= op.blocks; b += 2 * kChains) {
#pragma GCC unroll 2
    for (int c = 0; c < kChains; ++c) tile_step<F, RM, RN, true>(op, w, tokens, b + 2 * c, acc[c]);
  }
  for (; b + 2 <= op.blocks; b += 2) tile_step<F, RM, RN, true>(op, w, tokens, b, acc[0]);
  if (b < op.blocks) tile_step<F, RM, RN, false>(op, w, tokens, b, acc[0]);
#pragma GCC unroll 8
  for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      __m512 sum = acc[0][r][n];
#pragma GCC unroll 2
      for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c][r][n]);
      op.y[(token + n) * op.out + row + r] = _mm512_reduce_add_ps(sum);
    }
  }
}

// The rm × rn tile (rm <= RM, rn <= RN) at (row, token).
template <class F, int RM, int RN, class X>
void any_tile(int rm, int rn, const Operands& op, const X& x, std::int64_t row, std::int64_t token) {
  if constexpr (RN > 1) {
    if (rn < RN) return any_tile<F, RM, RN - 1>(rm, rn, op, x, row, token);
  }
  if constexpr (RM > 1) {
    if (rm < RM) return any_tile<F, RM - 1, RN>(rm, rn, op, x, row, token);
  }
  tile<F, RM, RN>(op, x, row, token);
}

// Prefill GEMM in row panels (the repacked layout of llamafile's and ggml's x86 Q4_0 GEMMs):
// per block, 16 weight rows are repacked into 8 zmm whose int32 lane e holds 4 consecutive
// values of one row (lanes = rows), so one vpdpbusd multiplies 16 rows × 4 values by 4 bytes of
// one token's activations, broadcast from memory. Per block and token that is 8 vpdpbusd for
// 512 multiply-adds and one scale FMA per 16 rows, where the register tiles above spend three
// float ops per vpdpbusd (measured: bench/gemm_quant_bench). The repacking (≈60 vector ops per
// 16 rows × 32 values) is paid once per pass of tokens and shared by all of them.
#include "kernels/cpu/matmul/rows_in_lanes-inl.h"

// One block of one panel: w[m] lane e = values 4m..4m+3 of row panel_row(e) as unsigned bytes
// (Q4_0: the nibbles 0..15; Q8_0: the values xor 0x80), d lane e = that row's block scale.
struct alignas(64) PanelBlock {
  __m512i w[8];
  __m512 d;
};

// Repacks block b of the 16 rows starting at w into `out`.
void repack_block(DType dtype, const std::uint8_t* w, std::size_t row_bytes, std::int64_t b, PanelBlock& out) {
  const std::size_t block_bytes = dtype == DType::kQ4_0 ? 18 : 34;
  const std::uint8_t* block = w + static_cast<std::size_t>(b) * block_bytes;
  __m512i lo[4], hi[4];
  for (int g = 0; g < 4; ++g) {
    const std::uint8_t* rows = block + 4 * g * row_bytes + 2;
    if (dtype == DType::kQ4_0) {  // 16 bytes: value j in the low nibble of byte j, j+16 in the high
      const __m512i z = four_rows(rows, row_bytes), mask = _mm512_set1_epi8(0x0f);
      lo[g] = _mm512_and_si512(z, mask);
      hi[g] = _mm512_and_si512(_mm512_srli_epi16(z, 4), mask);
    } else {  // 32 signed bytes, values 0..15 and 16..31
      const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
      lo[g] = _mm512_xor_si512(four_rows(rows, row_bytes), offset);
      hi[g] = _mm512_xor_si512(four_rows(rows + 16, row_bytes), offset);
    }
  }
  transpose4(lo[0], lo[1], lo[2], lo[3]);
  transpose4(hi[0], hi[1], hi[2], hi[3]);
  for (int m = 0; m < 4; ++m) {
    _mm512_store_si512(&out.w[m], lo[m]);
    _mm512_store_si512(&out.w[4 + m], hi[m]);
  }
  // The f16 scales (each block's first 2 bytes), gathered as the low halves of 32-bit words.
  const __m512i offsets = _mm512_mullo_epi32(
      permutation<std::int32_t>([](std::size_t e) { return panel_row(static_cast<int>(e)); }),
      _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i words = _mm512_i32gather_epi32(offsets, block, 1);
  out.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// The activation side of a panel GEMM: per token and block, the int32 bias that cancels the
// weights' unsigned offset, -c·Σ q_x (c = 8 for Q4_0 nibbles, 128 for Q8_0 xor 0x80).
void block_biases(const Operands& op, std::int64_t t0, std::int64_t t1, std::vector<std::int32_t>& bias) {
  const int c = op.dtype == DType::kQ4_0 ? 8 : 128;
  bias.resize(static_cast<std::size_t>((t1 - t0) * op.blocks));
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t t = t0; t < t1; ++t) {
    const std::int8_t* x = op.xq + t * op.in;
    for (std::int64_t b = 0; b < op.blocks; ++b) {
      // Σ (q + 128) over the 32 bytes as unsigned sums of absolute differences, minus 32·128.
      const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + b * kQuantBlock)), offset);
      const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
      const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
      const auto sum = static_cast<std::int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2)))) -
                       32 * 128;
      bias[static_cast<std::size_t>((t - t0) * op.blocks + b)] = -c * sum;
    }
  }
}

// y[token .. token+RN, row .. row+16·P] from P repacked panels ([blocks][P] PanelBlocks).
template <int P, int RN>
void panel_tile(const Operands& op, const PanelBlock* panels, const std::int32_t* bias, std::int64_t row,
                std::int64_t token) {
  __m512 acc[P][RN];
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[p][n] = _mm512_setzero_ps();
  }
  for (std::int64_t b = 0; b < op.blocks; ++b) {
    const PanelBlock* pb = panels + b * P;
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      const std::int8_t* x = op.xq + (token + n) * op.in + b * kQuantBlock;
      const __m512i init = _mm512_set1_epi32(bias[n * op.blocks + b]);
      const __m512 dx = _mm512_set1_ps(op.xd[(token + n) * op.blocks + b]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        __m512i dot = init;
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) {
          std::int32_t x4;
          std::memcpy(&x4, x + 4 * m, 4);
          dot = _mm512_dpbusd_epi32(dot, pb[p].w[m], _mm512_set1_epi32(x4));
        }
        acc[p][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(pb[p].d, dx), acc[p][n]);
      }
    }
  }
  const __m512i natural = permutation<std::int32_t>([](std::size_t r) { return panel_row(static_cast<int>(r)); });
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n) {
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      _mm512_storeu_ps(op.y + (token + n) * op.out + row + kPanelRows * p, _mm512_permutexvar_ps(natural, acc[p][n]));
    }
  }
}

// The P-panel tile for rn <= kPanelTokens tokens.
constexpr int kPanelTokens = 4;
template <int P, int RN = kPanelTokens>
void any_panel_tile(int rn, const Operands& op, const PanelBlock* panels, const std::int32_t* bias, std::int64_t row,
                    std::int64_t token) {
  if constexpr (RN > 1) {
    if (rn < RN) return any_panel_tile<P, RN - 1>(rn, op, panels, bias, row, token);
  }
  panel_tile<P, RN>(op, panels, bias, row, token);
}

// The repacking reads 16 rows side by side, block by block: 16 streams, more than the hardware
// prefetcher follows at full speed, so it prefetches each row's blocks ahead explicitly.
constexpr std::int64_t kPrefetchEvery = 2, kPrefetchBlocksAhead = 16;
HWY_INLINE void prefetch_panel(const Operands& op, const std::uint8_t* w, std::int64_t b) {
  if (b >= op.blocks) return;
  const std::size_t block_bytes = op.dtype == DType::kQ4_0 ? 18 : 34;
  for (int r = 0; r < kPanelRows; ++r) {
    hwy::Prefetch(w + r * op.row_bytes + static_cast<std::size_t>(b) * block_bytes);
  }
}

// Rows [row, row + 16·P) for tokens [t0, t1): repack the panels once, then every token tile.
template <int P>
void panel_rows(const Operands& op, std::int64_t row, std::int64_t t0, std::int64_t t1, const std::vector<std::int32_t>& bias) {
  thread_local hwy::AlignedFreeUniquePtr<PanelBlock[]> panels;
  thread_local std::size_t capacity = 0;
  const auto needed = static_cast<std::size_t>(op.blocks * P);
  if (capacity < needed) panels = hwy::AllocateAligned<PanelBlock>(capacity = needed);
  for (int p = 0; p < P; ++p) {
    const std::uint8_t* w = op.w + static_cast<std::size_t>(row + kPanelRows * p) * op.row_bytes;
    for (std::int64_t b = 0; b < op.blocks; ++b) {
      if (b % kPrefetchEvery == 0) prefetch_panel(op, w, b + kPrefetchBlocksAhead);
      repack_block(op.dtype, w, op.row_bytes, b, panels[b * P + p]);
    }
  }
  for (std::int64_t t = t0; t < t1; t += kPanelTokens) {
    const auto rn = static_cast<int>(std::min<std::int64_t>(kPanelTokens, t1 - t));
    any_panel_tile<P>(rn, op, panels.get(), bias.data() + (t - t0) * op.blocks, row, t);
  }
}

// Decode (all tokens in one tile column, n_tokens <= kTileTokens) uses the register tiles above,
// one row high, so each thread reads its rows as one sequential stream: four rows at a time are
// four streams restarting every few KB, which the hardware prefetcher followed at about half the
// bandwidth (measured: Q4_0 5632×2048 GEMV, 2 threads, 11 → 23 GB/s). Prefill runs the panels,
// and the rows of a range past its last whole panel 4 × 3 register tiles (12 accumulators +
// 4×3 (Q8_0) or 4×2 (Q4_0) weight registers + one token's 2-3 fit the 32 zmm without spills).
constexpr int kTileRows = 4, kTileTokens = 3;
// Tokens per pass over the rows: their activations (≈ in bytes each) stay in L2.
constexpr std::int64_t kActivationBytesPerPass = std::int64_t{1} << 18;

template <class F>
void gemm_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  if (op.n_tokens <= kTileTokens) {
    const PreparedActivations<F> x(op);
    const auto rn = static_cast<int>(op.n_tokens);
    for (std::int64_t row = row_begin; row < row_end; ++row) any_tile<F, 1, kTileTokens>(1, rn, op, x, row, 0);
    return;
  }
  const StreamedActivations<F> x{op};
  thread_local std::vector<std::int32_t> bias;
  const std::int64_t pass = std::max<std::int64_t>(kTileTokens, kActivationBytesPerPass / op.in / kTileTokens * kTileTokens);
  for (std::int64_t t0 = 0; t0 < op.n_tokens; t0 += pass) {
    const std::int64_t t1 = std::min(op.n_tokens, t0 + pass);
    block_biases(op, t0, t1, bias);
    std::int64_t row = row_begin;
    for (; row + 2 * kPanelRows <= row_end; row += 2 * kPanelRows) panel_rows<2>(op, row, t0, t1, bias);
    for (; row + kPanelRows <= row_end; row += kPanelRows) panel_rows<1>(op, row, t0, t1, bias);
    for (; row < row_end; row += kTileRows) {
      const auto rm = static_cast<int>(std::min<std::int64_t>(kTileRows, row_end - row));
      for (std::int64_t t = t0; t < t1; t += kTileTokens) {
        const auto rn = static_cast<int>(std::min<std::int64_t>(kTileTokens, t1 - t));
        any_tile<F, kTileRows, kTileTokens>(rm, rn, op, x, row, t);
      }
    }
  }
}

}  // namespace vnni
#pragma GCC pop_options

void GemmQuantRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  if (op.dtype == DType::kQ8_0) {
    vnni::gemm_rows<vnni::Q8_0Tile>(op, row_begin, row_end);
  } else {
    vnni::gemm_rows<vnni::Q4_0Tile>(op, row_begin, row_end);
  }
}

#else
// Portable path: each weight row is unpacked once to int8 values and f32 scales, then dotted
// with every token block by block with int16 widening multiply-adds.

std::int32_t BlockDot(const std::int8_t* a, const std::int8_t* b) {
  const hn::CappedTag<std::int16_t, kQuantBlock> d16;
  const hn::Rebind<std::int8_t, decltype(d16)> d8;
  const hn::RepartitionToWide<decltype(d16)> d32;
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  for (std::size_t j = 0; j < kQuantBlock; j += hn::Lanes(d16)) {
    sum0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(d8, a + j)),
                                         hn::PromoteTo(d16, hn::LoadU(d8, b + j)), sum0, sum1);
  }
  return hn::GetLane(hn::SumOfLanes(d32, hn::Add(sum0, sum1)));
}

void GemmQuantRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const std::size_t block_bytes = dtype_block_bytes(op.dtype);
  std::vector<std::int8_t> q(static_cast<std::size_t>(op.in));
  std::vector<float> d(static_cast<std::size_t>(op.blocks));
  for (std::int64_t row = row_begin; row < row_end; ++row) {
    const std::uint8_t* w = op.w + static_cast<std::size_t>(row) * op.row_bytes;
    for (std::int64_t b = 0; b < op.blocks; ++b) {
      d[b] = unpack_block_int8(op.dtype, w + b * block_bytes, &q[b * kQuantBlock]);
    }
    for (std::int64_t t = 0; t < op.n_tokens; ++t) {
      const std::int8_t* xq = op.xq + t * op.in;
      const float* xd = op.xd + t * op.blocks;
      float acc = 0.0f;
      for (std::int64_t b = 0; b < op.blocks; ++b) {
        const std::int32_t dot = BlockDot(&q[b * kQuantBlock], xq + b * kQuantBlock);
        acc += (d[b] * xd[b]) * static_cast<float>(dot);
      }
      op.y[t * op.out + row] = acc;
    }
  }
}
#endif

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(GemmQuantRows);

constexpr std::int64_t kTileRowMultiple = 16;  // whole row panels of the prefill GEMM

gemm_quant_detail::Operands operands(const TensorView& w, const QuantizedActivations& xq,
                                     std::span<float> y) {
  const std::int64_t out = w.n_rows();
  const std::size_t row_bytes = out > 0 ? w.nbytes / static_cast<std::size_t>(out) : 0;
  return {w.dtype, static_cast<const std::uint8_t*>(w.data), row_bytes,
          xq.q.data(), xq.d.data(), xq.in, xq.in / kQuantBlock, xq.n_tokens, out, y.data()};
}

}  // namespace

void gemm_quant(const TensorView& w, const QuantizedActivations& xq, std::span<float> y,
                ThreadPool& pool, std::int64_t min_parallel_macs) {
  const auto op = operands(w, xq, y);
  if (op.n_tokens == 0 || op.out == 0) return;
  if (w.packed != nullptr) {
    const PackedProduct product{w.dtype, static_cast<const std::uint8_t*>(w.packed), op.out, &xq, y};
    gemv_quant_packed({&product, 1}, pool, min_parallel_macs);
    return;
  }
  if (op.out * op.in * op.n_tokens < min_parallel_macs) {
    HWY_DYNAMIC_DISPATCH(GemmQuantRows)(op, 0, op.out);
    return;
  }
  split_rows_guided(op.out, op.row_bytes, kTileRowMultiple, pool,
                    [&](std::int64_t begin, std::int64_t end) { HWY_DYNAMIC_DISPATCH(GemmQuantRows)(op, begin, end); });
}

void gemm_quant_reference(const TensorView& w, const QuantizedActivations& xq, std::span<float> y) {
  const auto op = operands(w, xq, y);
  const std::size_t block_bytes = dtype_block_bytes(w.dtype);
  std::int8_t q[kQuantBlock];
  for (std::int64_t t = 0; t < op.n_tokens; ++t) {
    for (std::int64_t row = 0; row < op.out; ++row) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < op.blocks; ++b) {
        const float d = unpack_block_int8(w.dtype, op.w + row * op.row_bytes + b * block_bytes, q);
        const std::int8_t* x = op.xq + t * op.in + b * kQuantBlock;
        std::int32_t dot = 0;
        for (int j = 0; j < kQuantBlock; ++j) dot += std::int32_t{q[j]} * x[j];
        acc += (d * op.xd[t * op.blocks + b]) * static_cast<float>(dot);
      }
      op.y[t * op.out + row] = acc;
    }
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE

#include "quant/ggml_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "peregrine/quant/ggml_blocks.h"
#include "quant/ggml_scale_search.h"

namespace peregrine {
namespace {

using namespace ggml;

// Stores v in an f16 field, round-to-nearest-even (GGML_FP32_TO_FP16).
void store_f16(std::uint8_t* field, float v) {
  const std::uint16_t h = f32_to_f16(v);
  std::memcpy(field, &h, sizeof h);
}

int clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// ---- 32-value blocks -----------------------------------------------------------------------

struct BlockQ8_0 {
  std::uint8_t d[2];
  std::int8_t qs[kQK];
};
struct BlockQ4_0 {
  std::uint8_t d[2];
  std::uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);

void encode_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<std::int8_t>(std::roundf(x[j] * id));
}

// Codes of a legacy block: value j in the low nibble of qs[j] (j < 16) or the high nibble of
// qs[j - 16]; for 5-bit codes the fifth bit of value j is bit j of qh.
void pack_nibbles(const std::uint8_t* q, std::uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<std::uint8_t>((q[j] & 0xF) | (q[j + kQK / 2] & 0xF) << 4);
}

void pack_fifth_bits(const std::uint8_t* q, std::uint8_t* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, sizeof bits);
}

// Q4_0 / Q5_0: d = m / -half (m the value of largest magnitude, the first on ties), codes
// min(2·half − 1, trunc(x/d + half + 0.5)), so m itself codes as 0.
float symmetric_legacy_codes(const float* x, int half, std::uint8_t* q) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / static_cast<float>(-half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float offset = static_cast<float>(half) + 0.5f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<std::uint8_t>(std::min(2 * half - 1, static_cast<int>(static_cast<std::int8_t>(x[j] * id + offset))));
  }
  return d;
}

// Q4_1 / Q5_1: d = (max − min) / levels, codes min(levels, trunc((x − min)/d + 0.5)).
float asymmetric_legacy_codes(const float* x, int levels, float& min, std::uint8_t* q) {
  min = FLT_MAX;
  float max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<std::uint8_t>(std::min(levels, static_cast<int>((x[j] - min) * id + 0.5f)));
  }
  return d;
}

// Q4_0 / Q5_0 (d only) and Q4_1 / Q5_1 (d and min); a qh field means 5-bit codes.
template <class Block>
void encode_legacy(const float* x, Block& b) {
  constexpr bool kHasMin = requires(Block& blk) { blk.m; };
  constexpr bool kFiveBits = requires(Block& blk) { blk.qh; };
  std::uint8_t q[kQK];
  if constexpr (kHasMin) {
    float min;
    store_f16(b.d, asymmetric_legacy_codes(x, kFiveBits ? 31 : 15, min, q));
    store_f16(b.m, min);
  } else {
    store_f16(b.d, symmetric_legacy_codes(x, kFiveBits ? 16 : 8, q));
  }
  pack_nibbles(q, b.qs);
  if constexpr (kFiveBits) pack_fifth_bits(q, b.qh);
}

// ---- IQ4_NL / IQ4_XS (quantize_row_iq4_nl_impl, weights x², ntry 7) -----------------------

constexpr int kIq4Tries = 7;

int grid_index(float v) { return nearest_grid_index(kIq4nlValues, v); }

// The scale of a 32-value block on the IQ4 grid: starting from d = max / 127, the best
// Σwxq²/Σwq² over the inverse scales (k − 127)/max, k = -7..7; 0 for an all-zero block.
float iq4_block_scale(const float* x) {
  float weight[kQK];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    weight[j] = x[j] * x[j];
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float grid_min = static_cast<float>(kIq4nlValues[0]);
  auto sums = [&](float id, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float q = static_cast<float>(kIq4nlValues[grid_index(id * x[j])]);
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
  };
  float sumqx, sumq2;
  sums(1.0f / (-max / grid_min), sumqx, sumq2);
  float d = sumqx / sumq2;
  float best = d * sumqx;
  for (int k = -kIq4Tries; k <= kIq4Tries; ++k) {
    sums(static_cast<float>(k + kIq4nlValues[0]) / max, sumqx, sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// The 32 values of x as grid indices for the scale whose inverse is `id`, packed as nibbles.
void iq4_codes(const float* x, float id, std::uint8_t* qs) {
  std::uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = static_cast<std::uint8_t>(grid_index(id * x[j]));
  pack_nibbles(q, qs);
}

void encode_iq4_nl(const float* x, BlockIq4Nl& b) {
  const float d = iq4_block_scale(x);
  store_f16(b.d, d);
  iq4_codes(x, d != 0.0f ? 1.0f / d : 0.0f, b.qs);
}

void encode_iq4_xs(const float* x, BlockIq4Xs& b) {
  constexpr int kBlocks = kQK_K / kQK;
  float scales[kBlocks];
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int ib = 0; ib < kBlocks; ++ib) {
    scales[ib] = iq4_block_scale(x + kQK * ib);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32.0f;
  store_f16(b.d, d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::uint16_t scales_h = 0;
  std::memset(b.scales_l, 0, sizeof b.scales_l);
  for (int ib = 0; ib < kBlocks; ++ib) {
    const int l = clamp(nearest_int(id * scales[ib]), -32, 31);
    const float dl = d * static_cast<float>(l);
    iq4_codes(x + kQK * ib, dl != 0.0f ? 1.0f / dl : 0.0f, b.qs + kQK / 2 * ib);
    const int stored = l + 32;
    b.scales_l[ib / 2] = static_cast<std::uint8_t>(b.scales_l[ib / 2] | (stored & 0xF) << (4 * (ib % 2)));
    scales_h = static_cast<std::uint16_t>(scales_h | (stored >> 4) << (2 * ib));
  }
  std::memcpy(b.scales_h, &scales_h, sizeof scales_h);
}

// ---- K-quants (super-blocks of 256) ---------------------------------------------------------

// Q2_K / Q3_K code order: two halves of 128 values; byte l of a half's 32 holds values l, l+32,
// l+64, l+96 at bit shifts 0, 2, 4, 6.
void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
  }
}

// Re-codes the values of sub-block j (n values) with the decoded scale d and offset dm:
// l = clamp(round((x + dm) / d), 0, nmax). A zero d keeps the search's codes (as ggml does).
void recode_asymmetric(const float* x, int n, float d, float dm, int nmax, std::uint8_t* L) {
  if (d == 0.0f) return;
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::uint8_t>(clamp(nearest_int((x[i] + dm) / d), 0, nmax));
}

// The symmetric twin: l = clamp(round(x / d), -nmax, nmax - 1) + nmax; a zero d keeps the codes.
void recode_symmetric(const float* x, int n, float d, int nmax, std::int8_t* L) {
  if (d == 0.0f) return;
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(clamp(nearest_int(x[i] / d), -nmax, nmax - 1) + nmax);
}

// Q3_K / Q6_K: a symmetric scale per sub-block of 16 from `search` (codes into L); returns the
// scale of largest magnitude (signed, the first on ties).
constexpr int kSymSub = 16;

template <class Search>
float symmetric_sub_block_scales(const float* x, float* scales, std::int8_t* L, Search search) {
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < kQK_K / kSymSub; ++j) {
    scales[j] = search(std::span<const float>(x + kSymSub * j, kSymSub), L + kSymSub * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  return max_scale;
}

void encode_q2_k(const float* x, BlockQ2_K& b) {
  constexpr int kSub = 16;
  std::uint8_t L[kQK_K], Laux[kSub];
  float weights[kSub], mins[kQK_K / kSub], scales[kQK_K / kSub];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const float* xs = x + kSub * j;
    for (int l = 0; l < kSub; ++l) weights[l] = std::fabs(xs[l]);
    scales[j] = search_scale_and_min({xs, kSub}, 3, weights, L + kSub * j, mins[j], Laux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  constexpr float kLevels = 15.0f;
  if (max_scale > 0.0f) {
    const float iscale = kLevels / max_scale;
    for (int j = 0; j < kQK_K / kSub; ++j) b.scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
    store_f16(b.d, max_scale / kLevels);
  } else {
    std::memset(b.scales, 0, sizeof b.scales);
    store_f16(b.d, 0.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = kLevels / max_min;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      b.scales[j] = static_cast<std::uint8_t>(b.scales[j] | nearest_int(iscale * mins[j]) << 4);
    }
    store_f16(b.dmin, max_min / kLevels);
  } else {
    store_f16(b.dmin, 0.0f);
  }
  const float d = load_f16(b.d), dmin = load_f16(b.dmin);
  for (int j = 0; j < kQK_K / kSub; ++j) {
    recode_asymmetric(x + kSub * j, kSub, d * static_cast<float>(b.scales[j] & 0xF),
                      dmin * static_cast<float>(b.scales[j] >> 4), 3, L + kSub * j);
  }
  pack_2bit(L, b.qs);
}

void encode_q3_k(const float* x, BlockQ3_K& b) {
  constexpr int kSub = kSymSub;
  std::int8_t L[kQK_K];
  float scales[kQK_K / kSub];
  const float max_scale = symmetric_sub_block_scales(
      x, scales, L, [](std::span<const float> xs, std::int8_t* l) { return search_q3_scale(xs, 4, l); });
  std::memset(b.scales, 0, sizeof b.scales);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const int l = clamp(static_cast<std::int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
      b.scales[j % 8] = static_cast<std::uint8_t>(b.scales[j % 8] | (l & 0xF) << (j < 8 ? 0 : 4));
      b.scales[8 + j % 4] = static_cast<std::uint8_t>(b.scales[8 + j % 4] | (l >> 4) << (2 * (j / 4)));
    }
    store_f16(b.d, 1.0f / iscale);
  } else {
    store_f16(b.d, 0.0f);
  }
  std::uint8_t sc[kQK_K / kSub];
  unpack_q3_k_scales(b.scales, sc);
  const float d_all = load_f16(b.d);
  for (int j = 0; j < kQK_K / kSub; ++j) recode_symmetric(x + kSub * j, kSub, d_all * static_cast<float>(sc[j] - 32), 4, L + kSub * j);
  // Value j's third bit goes to bit j / 32 of hmask[j % 32]; the low two bits to qs.
  std::memset(b.hmask, 0, sizeof b.hmask);
  std::uint8_t low[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    const int q = L[j];
    if (q > 3) b.hmask[j % 32] = static_cast<std::uint8_t>(b.hmask[j % 32] | 1 << (j / 32));
    low[j] = static_cast<std::uint8_t>(q > 3 ? q - 4 : q);
  }
  pack_2bit(low, b.qs);
}

// Q4_K / Q5_K: per sub-block of 32 a scale and offset (search_scale_and_min with weights
// rms + |x|), both quantized to 6 bits and packed as scale_min_k4 reads them, d = max scale / 63,
// dmin = max offset / 63; the values re-coded to [0, nmax] with the quantized pair.
void k4_scales_and_codes(const float* x, int nmax, float rmin, int nstep, std::uint8_t* d, std::uint8_t* dmin,
                         std::uint8_t* packed, std::uint8_t* L) {
  constexpr int kSub = 32;
  std::uint8_t Laux[kSub];
  float weights[kSub], mins[kQK_K / kSub], scales[kQK_K / kSub];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = search_scale_and_min({xs, kSub}, nmax, weights, L + kSub * j, mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const auto ls = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | (lm & 0xF) << 4);
      packed[j - 4] = static_cast<std::uint8_t>(packed[j - 4] | (ls >> 4) << 6);
      packed[j] = static_cast<std::uint8_t>(packed[j] | (lm >> 4) << 6);
    }
  }
  store_f16(d, max_scale / 63.0f);
  store_f16(dmin, max_min / 63.0f);
  const float d_all = load_f16(d), dmin_all = load_f16(dmin);
  for (int j = 0; j < kQK_K / kSub; ++j) {
    std::uint8_t sc, m;
    scale_min_k4(j, packed, sc, m);
    recode_asymmetric(x + kSub * j, kSub, d_all * static_cast<float>(sc), dmin_all * static_cast<float>(m), nmax,
                      L + kSub * j);
  }
}

void encode_q4_k(const float* x, BlockQ4_K& b) {
  std::uint8_t L[kQK_K];
  k4_scales_and_codes(x, 15, -1.0f, 20, b.d, b.dmin, b.scales, L);
  for (int c = 0; c < kQK_K / 64; ++c) {  // chunk c: sub-block 2c low nibbles, 2c + 1 high
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = static_cast<std::uint8_t>(L[64 * c + l] | L[64 * c + l + 32] << 4);
  }
}

void encode_q5_k(const float* x, BlockQ5_K& b) {
  std::uint8_t L[kQK_K];
  k4_scales_and_codes(x, 31, -0.5f, 15, b.d, b.dmin, b.scales, L);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int c = 0; c < kQK_K / 64; ++c) {  // as Q4_K; the fifth bit of sub-block s's value l is bit s of qh[l]
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l], hi = L[64 * c + l + 32];
      b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
      b.qs[32 * c + l] = static_cast<std::uint8_t>((lo & 0xF) | (hi & 0xF) << 4);
    }
  }
}

void encode_q6_k(const float* x, BlockQ6_K& b) {
  constexpr int kSub = kSymSub;
  std::int8_t L[kQK_K];
  float scales[kQK_K / kSub];
  const float max_scale = symmetric_sub_block_scales(
      x, scales, L, [](std::span<const float> xs, std::int8_t* l) { return search_symmetric_scale(xs, 32, {}, l); });
  if (std::fabs(max_scale) < kGroupMaxEps) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  const float iscale = -128.0f / max_scale;
  store_f16(b.d, 1.0f / iscale);
  for (int j = 0; j < kQK_K / kSub; ++j) b.scales[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  const float d_all = load_f16(b.d);
  for (int j = 0; j < kQK_K / kSub; ++j) recode_symmetric(x + kSub * j, kSub, d_all * static_cast<float>(b.scales[j]), 32, L + kSub * j);
  // Two halves of 128: ql[l] / ql[l + 32] hold the low nibbles of values l, l+32 (low) and
  // l+64, l+96 (high); qh[l] the high 2 bits of l, l+32, l+64, l+96 at shifts 0, 2, 4, 6.
  for (int h = 0; h < 2; ++h) {
    const std::int8_t* q = L + 128 * h;
    std::uint8_t* ql = b.ql + 64 * h;
    std::uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<std::uint8_t>((q[l] & 0xF) | (q[l + 64] & 0xF) << 4);
      ql[l + 32] = static_cast<std::uint8_t>((q[l + 32] & 0xF) | (q[l + 96] & 0xF) << 4);
      qh[l] = static_cast<std::uint8_t>(q[l] >> 4 | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 | (q[l + 96] >> 4) << 6);
    }
  }
}

// Encodes every block of x with `encode` into consecutive Block structs at dst.
template <class Block>
void encode_blocks(std::span<const float> x, void* dst, int block_size, void (*encode)(const float*, Block&)) {
  auto* blocks = static_cast<Block*>(dst);
  for (std::size_t b = 0; b < x.size() / static_cast<std::size_t>(block_size); ++b) {
    encode(x.data() + b * static_cast<std::size_t>(block_size), blocks[b]);
  }
}

}  // namespace

bool quantize_ggml_blocks(DType t, std::span<const float> x, void* dst) {
  switch (t) {
    case DType::kQ8_0: encode_blocks<BlockQ8_0>(x, dst, kQK, encode_q8_0); return true;
    case DType::kQ4_0: encode_blocks<BlockQ4_0>(x, dst, kQK, encode_legacy<BlockQ4_0>); return true;
    case DType::kQ4_1: encode_blocks<BlockQ4_1>(x, dst, kQK, encode_legacy<BlockQ4_1>); return true;
    case DType::kQ5_0: encode_blocks<BlockQ5_0>(x, dst, kQK, encode_legacy<BlockQ5_0>); return true;
    case DType::kQ5_1: encode_blocks<BlockQ5_1>(x, dst, kQK, encode_legacy<BlockQ5_1>); return true;
    case DType::kIQ4_NL: encode_blocks<BlockIq4Nl>(x, dst, kQK, encode_iq4_nl); return true;
    case DType::kQ2_K: encode_blocks<BlockQ2_K>(x, dst, kQK_K, encode_q2_k); return true;
    case DType::kQ3_K: encode_blocks<BlockQ3_K>(x, dst, kQK_K, encode_q3_k); return true;
    case DType::kQ4_K: encode_blocks<BlockQ4_K>(x, dst, kQK_K, encode_q4_k); return true;
    case DType::kQ5_K: encode_blocks<BlockQ5_K>(x, dst, kQK_K, encode_q5_k); return true;
    case DType::kQ6_K: encode_blocks<BlockQ6_K>(x, dst, kQK_K, encode_q6_k); return true;
    case DType::kIQ4_XS: encode_blocks<BlockIq4Xs>(x, dst, kQK_K, encode_iq4_xs); return true;
    default: return false;
  }
}

}  // namespace peregrine

#include "quant/ggml_dequantize.h"

#include "peregrine/quant/ggml_blocks.h"

namespace peregrine {
namespace {

using namespace ggml;

// Low nibble of qs[j] for j < 16, high nibble of qs[j - 16] for j >= 16 (the legacy 32-value
// blocks' value order).
int nibble(const std::uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

void decode_q4_1(const BlockQ4_1& b, float* y) {
  const float d = load_f16(b.d), m = load_f16(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(nibble(b.qs, j)) * d + m;
}

// Bit j of a Q5 block's qh word: the fifth bit of value j.
int high_bit(std::uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1); }

void decode_q5_0(const BlockQ5_0& b, float* y) {
  const float d = load_f16(b.d);
  const std::uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>((nibble(b.qs, j) | high_bit(qh, j) << 4) - 16) * d;
}

void decode_q5_1(const BlockQ5_1& b, float* y) {
  const float d = load_f16(b.d), m = load_f16(b.m);
  const std::uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(nibble(b.qs, j) | high_bit(qh, j) << 4) * d + m;
}

void decode_iq4_nl(const BlockIq4Nl& b, float* y) {
  const float d = load_f16(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(kIq4nlValues[nibble(b.qs, j)]);
}

// Q2_K and Q3_K share an order: two halves of 128 values, each reading 32 qs bytes four times
// (2-bit fields at shifts 0, 2, 4, 6); within a shift, values l = 0..31 of that field, sub-block
// 2 * (4 * half + shift / 2) + l / 16.
template <class Value>
void for_each_2bit_field(const std::uint8_t* qs, float* y, Value value) {
  for (int half = 0; half < 2; ++half) {
    for (int field = 0; field < 4; ++field) {
      for (int l = 0; l < 32; ++l) {
        const int sub = 2 * (4 * half + field) + l / 16;
        const int q = (qs[32 * half + l] >> (2 * field)) & 3;
        *y++ = value(sub, q, 32 * half + l, field + 4 * half);
      }
    }
  }
}

void decode_q2_k(const BlockQ2_K& b, float* y) {
  const float d = load_f16(b.d), dmin = load_f16(b.dmin);
  for_each_2bit_field(b.qs, y, [&](int sub, int q, int, int) {
    const float dl = d * static_cast<float>(b.scales[sub] & 0xF);
    const float ml = dmin * static_cast<float>(b.scales[sub] >> 4);
    return dl * static_cast<float>(q) - ml;
  });
}

void decode_q3_k(const BlockQ3_K& b, float* y) {
  const float d = load_f16(b.d);
  std::uint8_t scales[16];
  unpack_q3_k_scales(b.scales, scales);
  // hmask bit (field + 4 * half) of byte l is value's third bit; when it is clear, q - 4.
  for_each_2bit_field(b.qs, y, [&](int sub, int q, int l, int hbit) {
    const float dl = d * static_cast<float>(scales[sub] - 32);
    const int high = (b.hmask[l % 32] >> hbit) & 1;
    return dl * static_cast<float>(q - (high ? 0 : 4));
  });
}

// Q4_K / Q5_K: four chunks of 64 values; chunk c reads qs[32c .. 32c+31], low nibbles for
// sub-block 2c, high nibbles for 2c + 1; Q5_K's fifth bit of value l of sub-block s is bit s of
// qh[l].
template <int kBits, class Block>
void decode_qk_k(const Block& b, const std::uint8_t* qh, float* y) {
  const float d = load_f16(b.d), dmin = load_f16(b.dmin);
  for (int sub = 0; sub < 8; ++sub) {
    std::uint8_t sc, m;
    scale_min_k4(sub, b.scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    const std::uint8_t* q = b.qs + 32 * (sub / 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> (4 * (sub % 2))) & 0xF;
      if constexpr (kBits == 5) v += ((qh[l] >> sub) & 1) ? 16 : 0;
      *y++ = d1 * static_cast<float>(v) - m1;
    }
  }
}

void decode_q6_k(const BlockQ6_K& b, float* y) {
  const float d = load_f16(b.d);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* ql = b.ql + 64 * half;
    const std::uint8_t* qh = b.qh + 32 * half;
    const std::int8_t* sc = b.scales + 8 * half;
    for (int quarter = 0; quarter < 4; ++quarter) {  // values 32 * quarter + l of the half
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
        const int q = (low | ((qh[l] >> (2 * quarter)) & 3) << 4) - 32;
        y[128 * half + 32 * quarter + l] = d * static_cast<float>(sc[l / 16 + 2 * quarter]) * static_cast<float>(q);
      }
    }
  }
}

void decode_iq4_xs(const BlockIq4Xs& b, float* y) {
  const float d = load_f16(b.d);
  for (int sub = 0; sub < 8; ++sub) {
    const float dl = d * static_cast<float>(iq4_xs_scale(b, sub) - 32);
    for (int j = 0; j < 32; ++j) *y++ = dl * static_cast<float>(kIq4nlValues[nibble(b.qs + 16 * sub, j)]);
  }
}

template <class Block, class Decode>
void decode_blocks(const void* src, std::span<float> out, int block_values, Decode decode) {
  const auto* blocks = static_cast<const Block*>(src);
  for (std::size_t i = 0; i < out.size() / static_cast<std::size_t>(block_values); ++i) {
    decode(blocks[i], out.data() + i * static_cast<std::size_t>(block_values));
  }
}

}  // namespace

bool dequantize_ggml_blocks(DType t, const void* src, std::span<float> out) {
  switch (t) {
    case DType::kQ4_1: decode_blocks<BlockQ4_1>(src, out, kQK, decode_q4_1); return true;
    case DType::kQ5_0: decode_blocks<BlockQ5_0>(src, out, kQK, decode_q5_0); return true;
    case DType::kQ5_1: decode_blocks<BlockQ5_1>(src, out, kQK, decode_q5_1); return true;
    case DType::kIQ4_NL: decode_blocks<BlockIq4Nl>(src, out, kQK, decode_iq4_nl); return true;
    case DType::kQ2_K: decode_blocks<BlockQ2_K>(src, out, kQK_K, decode_q2_k); return true;
    case DType::kQ3_K: decode_blocks<BlockQ3_K>(src, out, kQK_K, decode_q3_k); return true;
    case DType::kQ4_K:
      decode_blocks<BlockQ4_K>(src, out, kQK_K, [](const BlockQ4_K& b, float* y) { decode_qk_k<4>(b, nullptr, y); });
      return true;
    case DType::kQ5_K:
      decode_blocks<BlockQ5_K>(src, out, kQK_K, [](const BlockQ5_K& b, float* y) { decode_qk_k<5>(b, b.qh, y); });
      return true;
    case DType::kQ6_K: decode_blocks<BlockQ6_K>(src, out, kQK_K, decode_q6_k); return true;
    case DType::kIQ4_XS: decode_blocks<BlockIq4Xs>(src, out, kQK_K, decode_iq4_xs); return true;
    default: return false;
  }
}

}  // namespace peregrine

// Byte layouts of ggml's block formats beyond Q8_0 / Q4_0 (source of truth: ggml's
// ggml/src/ggml-common.h, llama.cpp b10470; the encoders and decoders follow ggml-quants.c).
//
// Every struct is made of bytes only (alignment 1), so a block may sit at any address in a
// memory-mapped file; the f16 fields are IEEE half floats, little-endian (read with load_f16).
// A row of n values is n / block-size consecutive blocks. The static_asserts pin the sizes to
// ggml's.
//
// Legacy 32-value blocks (value j of the block; nibble j means qs[j] & 15 for j < 16, qs[j-16] >> 4
// for j >= 16):
//   Q4_1:   x = d * nibble + m
//   Q5_0:   x = d * ((nibble | bit_j(qh) << 4) - 16)
//   Q5_1:   x = d * (nibble | bit_j(qh) << 4) + m                (qh: 32 bits, little-endian)
//   IQ4_NL: x = d * kIq4nlValues[nibble]                           (a non-uniform 4-bit grid)
// K-quant super-blocks of 256 values (QK_K), with sub-block scales quantized again:
//   Q2_K: 16 sub-blocks of 16; scales[i] = scale (low 4 bits) | min (high 4 bits);
//         x = d * scale * q - dmin * min, q 2 bits from qs (see dequantize_q2_k for the order)
//   Q3_K: 16 sub-blocks of 16; 6-bit scales packed in 12 bytes (unpack_q3_k_scales); 2 low bits
//         q from qs (the Q2_K order) and a high bit from hmask; x = d * (scale - 32) * (q - 4 when
//         the high bit is clear, else q)
//   Q4_K: 8 sub-blocks of 32; 6-bit scale and min per sub-block packed in 12 bytes
//         (scale_min_k4); x = d * scale * nibble - dmin * min
//   Q5_K: as Q4_K with a fifth bit per value in qh
//   Q6_K: 16 sub-blocks of 16 with int8 scales; q = 4 low bits (ql) | 2 high bits (qh) << 4;
//         x = d * scale * (q - 32)
//   IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h);
//         x = d * (scale - 32) * kIq4nlValues[nibble]
#pragma once

#include <cstdint>
#include <cstring>

#include "peregrine/quant/fp16.h"

namespace peregrine::ggml {

inline constexpr int kQK = 32;    // values per legacy block (QK4_1, QK5_0, QK5_1, QK4_NL)
inline constexpr int kQK_K = 256; // values per K-quant / IQ4_XS super-block (QK_K)
inline constexpr int kScaleSizeK = 12;  // K_SCALE_SIZE

struct BlockQ4_1 {
  std::uint8_t d[2], m[2];
  std::uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  std::uint8_t d[2];
  std::uint8_t qh[4];
  std::uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  std::uint8_t d[2], m[2];
  std::uint8_t qh[4];
  std::uint8_t qs[kQK / 2];
};
struct BlockIq4Nl {
  std::uint8_t d[2];
  std::uint8_t qs[kQK / 2];
};
struct BlockQ2_K {
  std::uint8_t scales[kQK_K / 16];
  std::uint8_t qs[kQK_K / 4];
  std::uint8_t d[2], dmin[2];
};
struct BlockQ3_K {
  std::uint8_t hmask[kQK_K / 8];
  std::uint8_t qs[kQK_K / 4];
  std::uint8_t scales[12];
  std::uint8_t d[2];
};
struct BlockQ4_K {
  std::uint8_t d[2], dmin[2];
  std::uint8_t scales[kScaleSizeK];
  std::uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  std::uint8_t d[2], dmin[2];
  std::uint8_t scales[kScaleSizeK];
  std::uint8_t qh[kQK_K / 8];
  std::uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  std::uint8_t ql[kQK_K / 2];
  std::uint8_t qh[kQK_K / 4];
  std::int8_t scales[kQK_K / 16];
  std::uint8_t d[2];
};
struct BlockIq4Xs {
  std::uint8_t d[2];
  std::uint8_t scales_h[2];
  std::uint8_t scales_l[kQK_K / 64];
  std::uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
              sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIq4Xs) == 136);

/// IQ4_NL / IQ4_XS's 16 code values (ggml-common.h kvalues_iq4nl).
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

/// An f16 field (2 bytes, little-endian) as f32.
inline float load_f16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return f16_to_f32(v);
}

/// A 32-bit little-endian field (Q5_0 / Q5_1 qh).
inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block from its 12 packed bytes
/// (ggml-quants.c get_scale_min_k4): 6 bits each; j < 4 in the low 6 bits of bytes j / j+4,
/// j >= 4 split between the low / high nibble of byte j+4 and the top 2 bits of bytes j-4 / j.
inline void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& scale, std::uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/// The 16 6-bit scales of a Q3_K super-block (0..63; the value is scale - 32) from its 12 packed
/// bytes (ggml-quants.c dequantize_row_q3_K's kmask unpacking): scale i has its low 4 bits in
/// byte i % 8 (low nibble for i < 8, high nibble for i >= 8) and its high 2 bits in byte
/// 8 + i % 4, bits 2 * (i / 4).
inline void unpack_q3_k_scales(const std::uint8_t* packed, std::uint8_t (&scales)[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = (packed[i % 8] >> (i < 8 ? 0 : 4)) & 0xF;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<std::uint8_t>(low | high << 4);
  }
}

/// The 8 6-bit scales of an IQ4_XS super-block (0..63; the value is scale - 32).
inline std::uint8_t iq4_xs_scale(const BlockIq4Xs& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  const int high = ((b.scales_h[0] | b.scales_h[1] << 8) >> (2 * j)) & 3;
  return static_cast<std::uint8_t>(low | high << 4);
}

}  // namespace peregrine::ggml

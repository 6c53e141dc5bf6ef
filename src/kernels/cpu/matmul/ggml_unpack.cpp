#include "peregrine/kernels/cpu/matmul/ggml_unpack.h"

#include <cstring>

#include "peregrine/quant/ggml_blocks.h"

namespace peregrine {
namespace {

using namespace ggml;

// Low nibble of qs[j] for j < 16, high nibble of qs[j - 16] for j >= 16.
int nibble(const std::uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// One 32-value block as 32 codes and its (a, b), at block slot k of the super-group.
void set_block(UnpackedSuperGroup& out, int k, float a, float b) {
  out.a[2 * k] = out.a[2 * k + 1] = a;
  out.b[2 * k] = out.b[2 * k + 1] = b;
}

void unpack_legacy_block(DType t, const std::uint8_t* src, int k, UnpackedSuperGroup& out) {
  std::uint8_t* u = out.u + 32 * k;
  switch (t) {
    case DType::kQ4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(src);
      for (int j = 0; j < 32; ++j) u[j] = static_cast<std::uint8_t>(nibble(b.qs, j));
      set_block(out, k, load_f16(b.d), load_f16(b.m));
      return;
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool q5_1 = t == DType::kQ5_1;
      const std::uint8_t* qh = src + (q5_1 ? 4 : 2);
      const std::uint8_t* qs = qh + 4;
      const std::uint32_t h = load_u32(qh);
      for (int j = 0; j < 32; ++j) u[j] = static_cast<std::uint8_t>(nibble(qs, j) | ((h >> j) & 1) << 4);
      const float d = load_f16(src);
      set_block(out, k, d, q5_1 ? load_f16(src + 2) : -16.0f * d);
      return;
    }
    default: {  // IQ4_NL
      const auto& b = *reinterpret_cast<const BlockIq4Nl*>(src);
      for (int j = 0; j < 32; ++j) u[j] = static_cast<std::uint8_t>(kIq4nlValues[nibble(b.qs, j)] + 128);
      const float d = load_f16(b.d);
      set_block(out, k, d, -128.0f * d);
      return;
    }
  }
}

// Q2_K / Q3_K's 2-bit field of value i (0..255): byte 32·(i/128) + i%32, bits 2·((i/32)%4).
int two_bits(const std::uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

void unpack_q2_k(const BlockQ2_K& b, UnpackedSuperGroup& out) {
  const float d = load_f16(b.d), dmin = load_f16(b.dmin);
  for (int i = 0; i < kQK_K; ++i) out.u[i] = static_cast<std::uint8_t>(two_bits(b.qs, i));
  for (int s = 0; s < 16; ++s) {
    out.a[s] = d * static_cast<float>(b.scales[s] & 0xF);
    out.b[s] = -dmin * static_cast<float>(b.scales[s] >> 4);
  }
}

void unpack_q3_k(const BlockQ3_K& b, UnpackedSuperGroup& out) {
  const float d = load_f16(b.d);
  std::uint8_t scales[16];
  unpack_q3_k_scales(b.scales, scales);
  for (int i = 0; i < kQK_K; ++i) {
    const int high = (b.hmask[i % 32] >> (i / 32)) & 1;  // value = q - 4 + 4·high
    out.u[i] = static_cast<std::uint8_t>(two_bits(b.qs, i) + 4 * high);
  }
  for (int s = 0; s < 16; ++s) {
    out.a[s] = d * static_cast<float>(scales[s] - 32);
    out.b[s] = -4.0f * out.a[s];
  }
}

template <int kBits, class Block>
void unpack_qk_k(const Block& b, const std::uint8_t* qh, UnpackedSuperGroup& out) {
  const float d = load_f16(b.d), dmin = load_f16(b.dmin);
  for (int sub = 0; sub < 8; ++sub) {
    std::uint8_t sc, m;
    scale_min_k4(sub, b.scales, sc, m);
    for (int l = 0; l < 32; ++l) {
      int v = (b.qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 0xF;
      if constexpr (kBits == 5) v |= ((qh[l] >> sub) & 1) << 4;
      out.u[32 * sub + l] = static_cast<std::uint8_t>(v);
    }
    out.a[2 * sub] = out.a[2 * sub + 1] = d * static_cast<float>(sc);
    out.b[2 * sub] = out.b[2 * sub + 1] = -dmin * static_cast<float>(m);
  }
}

void unpack_q6_k(const BlockQ6_K& b, UnpackedSuperGroup& out) {
  const float d = load_f16(b.d);
  for (int i = 0; i < kQK_K; ++i) {
    const int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
    const int low = (b.ql[64 * half + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
    out.u[i] = static_cast<std::uint8_t>(low | ((b.qh[32 * half + l] >> (2 * quarter)) & 3) << 4);
  }
  for (int s = 0; s < 16; ++s) {
    out.a[s] = d * static_cast<float>(b.scales[s]);
    out.b[s] = -32.0f * out.a[s];
  }
}

void unpack_iq4_xs(const BlockIq4Xs& b, UnpackedSuperGroup& out) {
  const float d = load_f16(b.d);
  for (int sub = 0; sub < 8; ++sub) {
    for (int j = 0; j < 32; ++j) {
      out.u[32 * sub + j] = static_cast<std::uint8_t>(kIq4nlValues[nibble(b.qs + 16 * sub, j)] + 128);
    }
    const float a = d * static_cast<float>(iq4_xs_scale(b, sub) - 32);
    out.a[2 * sub] = out.a[2 * sub + 1] = a;
    out.b[2 * sub] = out.b[2 * sub + 1] = -128.0f * a;
  }
}

}  // namespace

std::size_t super_group_bytes(DType t) {
  const std::size_t blocks = dtype_block_size(t) == 32 ? kSuperGroup / 32 : 1;
  return blocks * dtype_block_bytes(t);
}

void unpack_super_group(DType t, const std::uint8_t* src, int blocks, UnpackedSuperGroup& out) {
  switch (t) {
    case DType::kQ2_K: return unpack_q2_k(*reinterpret_cast<const BlockQ2_K*>(src), out);
    case DType::kQ3_K: return unpack_q3_k(*reinterpret_cast<const BlockQ3_K*>(src), out);
    case DType::kQ4_K: {
      const auto& b = *reinterpret_cast<const BlockQ4_K*>(src);
      return unpack_qk_k<4>(b, nullptr, out);
    }
    case DType::kQ5_K: {
      const auto& b = *reinterpret_cast<const BlockQ5_K*>(src);
      return unpack_qk_k<5>(b, b.qh, out);
    }
    case DType::kQ6_K: return unpack_q6_k(*reinterpret_cast<const BlockQ6_K*>(src), out);
    case DType::kIQ4_XS: return unpack_iq4_xs(*reinterpret_cast<const BlockIq4Xs*>(src), out);
    default: break;
  }
  std::memset(&out, 0, sizeof out);
  for (int k = 0; k < blocks; ++k) unpack_legacy_block(t, src + k * dtype_block_bytes(t), k, out);
}

}  // namespace peregrine

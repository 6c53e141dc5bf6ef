#include "peregrine/quant/quantize_rtn.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/fp8.h"

namespace peregrine {
namespace {

constexpr std::size_t kBlock = 32;

void store_u16(std::uint8_t* p, std::uint16_t v) { std::memcpy(p, &v, sizeof v); }

void quantize_q8_0(std::span<const float> x, std::uint8_t* dst) {
  for (std::size_t b = 0; b < x.size() / kBlock; ++b, dst += 34) {
    const float* v = x.data() + b * kBlock;
    float amax = 0.0f;
    for (std::size_t j = 0; j < kBlock; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, f32_to_f16(d));
    for (std::size_t j = 0; j < kBlock; ++j) {
      dst[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::roundf(v[j] * id)));
    }
  }
}

void quantize_q4_0(std::span<const float> x, std::uint8_t* dst) {
  for (std::size_t b = 0; b < x.size() / kBlock; ++b, dst += 18) {
    const float* v = x.data() + b * kBlock;
    float amax = 0.0f, max = 0.0f;
    for (std::size_t j = 0; j < kBlock; ++j) {
      if (std::fabs(v[j]) > amax) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, f32_to_f16(d));
    auto nibble = [id](float value) {
      const auto q = static_cast<std::int8_t>(value * id + 8.5f);  // trunc; value*id >= -8
      return static_cast<std::uint8_t>(q < 15 ? q : 15);
    };
    for (std::size_t j = 0; j < kBlock / 2; ++j) {
      dst[2 + j] = static_cast<std::uint8_t>(nibble(v[j]) | nibble(v[j + kBlock / 2]) << 4);
    }
  }
}

void quantize_half(std::span<const float> x, std::uint8_t* dst, std::uint16_t (*encode)(float)) {
  for (std::size_t i = 0; i < x.size(); ++i) store_u16(dst + 2 * i, encode(x[i]));
}

void quantize_row_scaled(std::span<const float> x, std::uint8_t* dst, float max_code,
                         std::uint8_t (*encode)(float)) {
  float amax = 0.0f;
  for (float v : x) amax = std::fmax(amax, std::fabs(v));
  const float s = amax / max_code;
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  std::memcpy(dst, &s, sizeof s);
  for (std::size_t i = 0; i < x.size(); ++i) dst[kRowScaleBytes + i] = encode(x[i] * inv);
}

std::uint8_t encode_int8(float v) {
  return static_cast<std::uint8_t>(static_cast<std::int8_t>(std::roundf(v)));
}

}  // namespace

void quantize_rtn(DType t, std::span<const float> x, void* dst) {
  auto* p = static_cast<std::uint8_t*>(dst);
  switch (t) {
    case DType::kF32: std::memcpy(p, x.data(), x.size_bytes()); return;
    case DType::kF16: quantize_half(x, p, f32_to_f16); return;
    case DType::kBF16: quantize_half(x, p, f32_to_bf16); return;
    case DType::kQ8_0: quantize_q8_0(x, p); return;
    case DType::kQ4_0: quantize_q4_0(x, p); return;
    case DType::kI8: quantize_row_scaled(x, p, 127.0f, encode_int8); return;
    case DType::kF8E4M3: quantize_row_scaled(x, p, kFp8E4M3Max, f32_to_fp8_e4m3); return;
    case DType::kF8E5M2: quantize_row_scaled(x, p, kFp8E5M2Max, f32_to_fp8_e5m2); return;
    case DType::kInt: return;  // precondition: use quant/int_group.h
    default: return;           // precondition: the other ggml block formats have their own encoders
  }
}

}  // namespace peregrine

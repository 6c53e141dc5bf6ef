#include "peregrine/quant/quantize_rtn.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/fp8.h"
#include "peregrine/quant/nf4.h"
#include "quant/ggml_quantize.h"

namespace peregrine {
namespace {

void store_u16(std::uint8_t* p, std::uint16_t v) { std::memcpy(p, &v, sizeof v); }

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
    case DType::kI8: quantize_row_scaled(x, p, 127.0f, encode_int8); return;
    case DType::kF8E4M3: quantize_row_scaled(x, p, kFp8E4M3Max, f32_to_fp8_e4m3); return;
    case DType::kF8E5M2: quantize_row_scaled(x, p, kFp8E5M2Max, f32_to_fp8_e5m2); return;
    case DType::kNF4: nf4_encode_row(x, p); return;
    case DType::kInt: return;  // precondition: use quant/int_group.h
    default: quantize_ggml_blocks(t, x, p); return;  // Q8_0, Q4_0 and the other ggml block formats
  }
}

}  // namespace peregrine

#include "peregrine/quant/fp16.h"

#include <cmath>

namespace peregrine {

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1f;
  const std::uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

std::uint16_t f32_to_f16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7e00);
  if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7c00);  // rounds to inf
  if (a < 6.103515625e-05f) {  // subnormal range: quantize to multiples of 2^-24
    const auto m = static_cast<std::uint16_t>(std::nearbyint(a * 16777216.0f));
    return static_cast<std::uint16_t>(sign | m);
  }
  const std::uint32_t ax = std::bit_cast<std::uint32_t>(a);
  std::uint32_t r = ax + 0x0fff + ((ax >> 13) & 1);  // round to nearest even at bit 13
  r = ((r >> 23) - 112) << 10 | ((r >> 13) & 0x3ff);
  return static_cast<std::uint16_t>(sign | r);
}

std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40);
  return static_cast<std::uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace peregrine

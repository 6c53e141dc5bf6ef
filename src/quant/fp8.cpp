#include "peregrine/quant/fp8.h"

#include <bit>
#include <cmath>
#include <limits>

namespace peregrine {
namespace {

// A normal/subnormal minifloat with `exp_bits` exponent bits and `man_bits` mantissa bits.
float minifloat_to_f32(std::uint8_t v, int exp_bits, int man_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (v >> man_bits) & ((1 << exp_bits) - 1);
  const int m = v & ((1 << man_bits) - 1);
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), 1 - bias - man_bits);
  return sign * std::ldexp(static_cast<float>((1 << man_bits) | m), e - bias - man_bits);
}

// Round-to-nearest-even encoding of |f| <= max_finite (saturated by the caller) as a minifloat.
std::uint8_t f32_to_minifloat(float f, int exp_bits, int man_bits, float max_finite) {
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fmin(std::fabs(f), max_finite);
  const int bias = (1 << (exp_bits - 1)) - 1;
  int e;
  std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  const int exponent = std::max(e - 1, 1 - bias);  // subnormals share the smallest exponent
  const float quantum = std::ldexp(1.0f, exponent - man_bits);
  const float q = std::nearbyint(a / quantum) * quantum;  // RNE (default rounding mode)
  a = std::fmin(q, max_finite);
  // Encode a exactly.
  if (a == 0.0f) return sign;
  std::frexp(a, &e);
  int biased = e - 1 + bias;
  if (biased <= 0) {
    const int m = static_cast<int>(std::ldexp(a, bias - 1 + man_bits));
    return static_cast<std::uint8_t>(sign | m);
  }
  const int m = static_cast<int>(std::ldexp(a, man_bits - (e - 1))) - (1 << man_bits);
  return static_cast<std::uint8_t>(sign | (biased << man_bits) | m);
}

}  // namespace

float fp8_e4m3_to_f32(std::uint8_t v) {
  if ((v & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  return minifloat_to_f32(v, 4, 3);
}

std::uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  return f32_to_minifloat(f, 4, 3, kFp8E4M3Max);
}

float fp8_e5m2_to_f32(std::uint8_t v) {
  const int e = (v >> 2) & 0x1f;
  if (e == 0x1f) {
    if ((v & 0x3) != 0) return std::numeric_limits<float>::quiet_NaN();
    return (v & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return minifloat_to_f32(v, 5, 2);
}

std::uint8_t f32_to_fp8_e5m2(float f) {
  if (std::isnan(f)) return 0x7f;
  return f32_to_minifloat(f, 5, 2, kFp8E5M2Max);
}

float fp8_max(DType t) { return t == DType::kF8E4M3 ? kFp8E4M3Max : kFp8E5M2Max; }

}  // namespace peregrine

// IEEE half (F16) and bfloat16 (BF16) scalar conversions.
#pragma once

#include <bit>
#include <cstdint>

namespace peregrine {

/// IEEE 754 binary16 → float (exact; handles subnormals, inf, NaN).
float f16_to_f32(std::uint16_t h);
/// float → binary16, round-to-nearest-even (overflow → inf).
std::uint16_t f32_to_f16(float f);

/// bfloat16 → float (exact: the high 16 bits of a float).
inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
/// float → bfloat16, round-to-nearest-even (NaN stays NaN).
std::uint16_t f32_to_bf16(float f);

/// Two floats as one pair of bfloat16 (each f32_to_bf16), `lo` in the low 16 bits: the operand
/// layout of VDPBF16PS (kernels/cpu/matmul/gemm_bf16_dot.h, gemv_bf16_dot.h).
inline std::uint32_t f32_pair_to_bf16(float lo, float hi) {
  return static_cast<std::uint32_t>(f32_to_bf16(lo)) | static_cast<std::uint32_t>(f32_to_bf16(hi)) << 16;
}

}  // namespace peregrine

// FP8 scalar conversions: E4M3 (OCP "FN" variant: no infinities, finite max 448, NaN = S.1111.111)
// and E5M2 (IEEE-like: max 57344, infinities and NaNs).
//
// Spec: Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; OCP 8-bit Floating Point
// Specification (OFP8) rev 1.0.
#pragma once

#include <cstdint>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Largest finite magnitude of E4M3 (448) and E5M2 (57344).
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

/// E4M3 byte → float (exact; subnormals included; 0x7f / 0xff are NaN).
float fp8_e4m3_to_f32(std::uint8_t v);
/// float → E4M3, round-to-nearest-even, saturating to ±448 (NaN → 0x7f).
std::uint8_t f32_to_fp8_e4m3(float f);
/// E5M2 byte → float (exact).
float fp8_e5m2_to_f32(std::uint8_t v);
/// float → E5M2, round-to-nearest-even, saturating to ±57344 (NaN stays NaN).
std::uint8_t f32_to_fp8_e5m2(float f);

/// Largest finite magnitude of kF8E4M3 / kF8E5M2. Precondition: t is one of them.
float fp8_max(DType t);

}  // namespace peregrine

// quantize_rtn: hand-computed GGUF block bytes (ties, clamping, sign of the Q4_0 scale) and
// quantize → dequantize round trips on fresh random rows within the RTN error bound.
#include "peregrine/quant/quantize_rtn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes encode(DType t, const std::vector<float>& x) {
  Bytes out(*dtype_row_bytes(t, x.size()), 0xcd);
  quantize_rtn(t, x, out.data());
  return out;
}

std::uint16_t scale_bits(const Bytes& b, std::size_t block, std::size_t block_bytes) {
  std::uint16_t d;
  std::memcpy(&d, b.data() + block * block_bytes, 2);
  return d;
}

TEST(QuantizeRtn, Q8_0RoundsHalfAwayFromZeroWithScaleAbsmaxOver127) {
  // absmax 127 → d = 1 exactly, so q = roundf(x).
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, -127.0f, 63.5f, -63.5f, 0.5f, -0.5f, 1.49f, -2.51f, 100.2f};
  const int want[] = {127, -127, 64, -64, 1, -1, 1, -3, 100};
  std::copy(std::begin(in), std::end(in), x.begin());
  const Bytes b = encode(DType::kQ8_0, x);
  EXPECT_EQ(scale_bits(b, 0, 34), 0x3c00);  // f16 1.0
  for (std::size_t j = 0; j < std::size(want); ++j) {
    EXPECT_EQ(static_cast<std::int8_t>(b[2 + j]), want[j]) << j;
  }
  for (std::size_t j = std::size(want); j < 32; ++j) EXPECT_EQ(b[2 + j], 0) << j;
}

TEST(QuantizeRtn, Q4_0ScaleIsSignedMaxOverMinus8AndRoundsHalfUp) {
  // Largest magnitude is -8 → d = 1: nibble = min(15, trunc(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  const float in[] = {-8.0f, 7.0f, 7.9f, -2.5f, 2.5f, 0.49f, -0.51f};
  const int want[] = {0, 15, 15, 6, 11, 8, 7};
  std::copy(std::begin(in), std::end(in), x.begin());
  x[16] = 3.0f;  // a high nibble: value 16 shares byte 0 with value 0
  const Bytes b = encode(DType::kQ4_0, x);
  EXPECT_EQ(scale_bits(b, 0, 18), 0x3c00);
  for (std::size_t j = 0; j < std::size(want); ++j) EXPECT_EQ(b[2 + j] & 0x0f, want[j]) << j;
  EXPECT_EQ(b[2] >> 4, 11);
  // A positive largest value flips the scale: d = 8 / -8 = -1, and the maximum maps to 0.
  std::vector<float> y(32, 0.0f);
  y[0] = 8.0f;
  y[1] = -7.0f;
  const Bytes c = encode(DType::kQ4_0, y);
  EXPECT_EQ(scale_bits(c, 0, 18), 0xbc00);  // f16 -1.0
  EXPECT_EQ(c[2] & 0x0f, 0);
  EXPECT_EQ(c[3] & 0x0f, 15);
  EXPECT_EQ(c[4], 0x88);  // zeros encode as 8
}

TEST(QuantizeRtn, ZeroBlocksHaveZeroScale) {
  const std::vector<float> x(64, 0.0f);
  const Bytes q8 = encode(DType::kQ8_0, x), q4 = encode(DType::kQ4_0, x);
  for (std::size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(scale_bits(q8, b, 34), 0);
    EXPECT_EQ(scale_bits(q4, b, 18), 0x8000);  // -0: d = 0 / -8, as in ggml
    for (std::size_t j = 0; j < 32; ++j) EXPECT_EQ(q8[b * 34 + 2 + j], 0);
    for (std::size_t j = 0; j < 16; ++j) EXPECT_EQ(q4[b * 18 + 2 + j], 0x88);
  }
}

TEST(QuantizeRtn, HalfTypesUseTheScalarConversions) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(37);
  for (auto& v : x) v = dist(rng);
  const Bytes f16 = encode(DType::kF16, x), bf16 = encode(DType::kBF16, x), f32 = encode(DType::kF32, x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint16_t h, b;
    std::memcpy(&h, f16.data() + 2 * i, 2);
    std::memcpy(&b, bf16.data() + 2 * i, 2);
    EXPECT_EQ(h, f32_to_f16(x[i])) << i;
    EXPECT_EQ(b, f32_to_bf16(x[i])) << i;
  }
  EXPECT_EQ(std::memcmp(f32.data(), x.data(), f32.size()), 0);
}

// Round trip: with d the f32 scale and d16 the stored f16 scale, RTN puts x within |d|/2 of
// d*q (|d| for Q4_0 values clamped from nibble 16 to 15, i.e. x/d >= 7.5), and decoding with
// d16 adds |d - d16| * |q| (|q| <= 127 for Q8_0, <= 8 for Q4_0). The f32 product x * (1/d)
// adds a few ulps of amax; 1e-6 * amax covers it.
void expect_round_trip_within_bound(DType t, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  x[n / 3] *= 40.0f;  // an outlier block
  const Bytes b = encode(t, x);
  std::vector<float> y(n);
  dequantize(t, b.data(), y);
  const std::size_t block_bytes = dtype_block_bytes(t);
  for (std::size_t blk = 0; blk < n / 32; ++blk) {
    float amax = 0.0f, max = 0.0f;
    for (std::size_t j = 0; j < 32; ++j) {
      const float v = x[blk * 32 + j];
      if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
    }
    const float d = t == DType::kQ8_0 ? amax / 127.0f : max / -8.0f;
    const float d16 = f16_to_f32(scale_bits(b, blk, block_bytes));
    const float q_max = t == DType::kQ8_0 ? 127.0f : 8.0f;
    for (std::size_t j = 0; j < 32; ++j) {
      const float v = x[blk * 32 + j];
      const bool clamped = t == DType::kQ4_0 && v / d >= 7.5f;
      const float bound = std::fabs(d) * (clamped ? 1.0f : 0.5f) + std::fabs(d - d16) * q_max + 1e-6f * amax;
      ASSERT_LE(std::fabs(y[blk * 32 + j] - v), bound) << "block " << blk << " value " << j;
    }
  }
}

TEST(QuantizeRtn, Q8_0RoundTripWithinHalfAStep) {
  for (std::size_t n : {32u, 64u, 4096u + 32u}) expect_round_trip_within_bound(DType::kQ8_0, n, 11 + static_cast<std::uint32_t>(n));
}

TEST(QuantizeRtn, Q4_0RoundTripWithinHalfAStep) {
  for (std::size_t n : {32u, 96u, 4096u + 32u}) expect_round_trip_within_bound(DType::kQ4_0, n, 17 + static_cast<std::uint32_t>(n));
}

TEST(QuantizeRtn, HalfRoundTripWithinHalfAnUlp) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> x(1001);
  for (auto& v : x) v = dist(rng);
  for (DType t : {DType::kF16, DType::kBF16}) {
    const Bytes b = encode(t, x);
    std::vector<float> y(x.size());
    dequantize(t, b.data(), y);
    const int mantissa_bits = t == DType::kF16 ? 10 : 7;
    for (std::size_t i = 0; i < x.size(); ++i) {
      // Half an ulp of x is 2^(exponent(x) - mantissa_bits - 1); F16 subnormals (|x| < 2^-14)
      // are spaced 2^-24 apart.
      const float half_ulp = std::fmax(std::ldexp(1.0f, std::ilogb(x[i]) - mantissa_bits - 1),
                                       t == DType::kF16 ? 0x1p-25f : 0.0f);
      ASSERT_LE(std::fabs(y[i] - x[i]), half_ulp) << dtype_name(t) << " " << x[i];
    }
  }
}

}  // namespace
}  // namespace peregrine

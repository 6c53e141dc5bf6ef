#include "peregrine/quant/fp16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace peregrine {
namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

bool f16_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

// ---------------------------------------------------------------- F16

TEST(F16, KnownValuesDecode) {
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);  // (1 + 0x155/1024) * 2^-2
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);                         // largest finite
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));             // smallest normal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));          // largest subnormal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));             // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(F16, AllBitPatternsRoundTrip) {
  for (std::uint32_t u = 0; u <= 0xffff; ++u) {
    const auto h = static_cast<std::uint16_t>(u);
    const float f = f16_to_f32(h);
    const std::uint16_t back = f32_to_f16(f);
    if (f16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << u;
      ASSERT_TRUE(f16_is_nan(back)) << std::hex << u;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "NaN sign lost, " << std::hex << u;
    } else {
      ASSERT_EQ(back, h) << std::hex << u << " -> " << f;
    }
  }
}

TEST(F16, HalfwayCasesRoundToNearestEven) {
  // Every midpoint between consecutive f16 values (subnormal and normal, both signs) is exact
  // in f32; it must go to the neighbour with an even mantissa, and one f32 ulp either side
  // must go to the nearer neighbour.
  for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
    for (std::uint16_t h = 0; h < 0x7bff; ++h) {
      const double lo = std::fabs(f16_to_f32(h)), hi = std::fabs(f16_to_f32(h + 1));
      const auto mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);  // exact
      const float s = sign ? -1.0f : 1.0f;
      const std::uint16_t even = (h & 1) ? h + 1 : h;
      ASSERT_EQ(f32_to_f16(s * mid), sign | even) << std::hex << h;
      ASSERT_EQ(f32_to_f16(s * std::nextafter(mid, 0.0f)), sign | h) << std::hex << h;
      ASSERT_EQ(f32_to_f16(s * std::nextafter(mid, 1e9f)), sign | (h + 1)) << std::hex << h;
    }
  }
}

TEST(F16, OverflowGoesToInfinity) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // below the midpoint
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                        // tie → even (inf)
  EXPECT_EQ(f32_to_f16(65536.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(f16_is_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(F16, Subnormals) {
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie → even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 → 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -26)), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);
  // Just under the smallest normal rounds up into it.
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(F16, RandomFloatsRoundToNearest) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> exponent(-27.0f, 16.0f);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(mant(rng), static_cast<int>(exponent(rng))) * ((i & 1) ? -1.0f : 1.0f);
    const std::uint16_t h = f32_to_f16(x);
    const double err = std::fabs(static_cast<double>(f16_to_f32(h)) - x);
    // Neither neighbour of h is strictly closer.
    for (int d : {-1, 1}) {
      const auto nb = static_cast<std::uint16_t>((h & 0x7fff) + d) | (h & 0x8000);
      if ((h & 0x7fff) == 0 && d < 0) continue;
      if (((nb & 0x7fff) >= 0x7c00)) continue;
      ASSERT_LE(err, std::fabs(static_cast<double>(f16_to_f32(static_cast<std::uint16_t>(nb))) - x))
          << x;
    }
  }
}

// ---------------------------------------------------------------- BF16

TEST(BF16, KnownValues) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(3.14159265f), 0x4049);  // 3.140625
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(BF16, AllBitPatternsRoundTrip) {
  for (std::uint32_t u = 0; u <= 0xffff; ++u) {
    const auto h = static_cast<std::uint16_t>(u);
    const float f = bf16_to_f32(h);
    ASSERT_EQ(bits(f), u << 16);
    const std::uint16_t back = f32_to_bf16(f);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << u;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << u;
    } else {
      ASSERT_EQ(back, h) << std::hex << u;
    }
  }
}

TEST(BF16, HalfwayCasesRoundToNearestEven) {
  for (std::uint32_t u = 0; u <= 0xffff; ++u) {
    if ((u & 0x7f80) == 0x7f80) continue;  // inf / NaN have no upper neighbour
    const std::uint32_t mid = (u << 16) | 0x8000;
    const auto even = static_cast<std::uint16_t>((u & 1) ? u + 1 : u);
    ASSERT_EQ(f32_to_bf16(from_bits(mid)), even) << std::hex << u;
    ASSERT_EQ(f32_to_bf16(from_bits(mid - 1)), u) << std::hex << u;
    ASSERT_EQ(f32_to_bf16(from_bits(mid + 1)), static_cast<std::uint16_t>(u + 1)) << std::hex << u;
  }
}

TEST(BF16, NaNStaysNaN) {
  // A NaN whose payload lives only in the low 16 bits must not truncate to infinity.
  for (std::uint32_t n : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu}) {
    const std::uint16_t b = f32_to_bf16(from_bits(n));
    EXPECT_TRUE(bf16_is_nan(b)) << std::hex << n;
    EXPECT_EQ(b & 0x8000, (n >> 16) & 0x8000);
  }
}

}  // namespace
}  // namespace peregrine

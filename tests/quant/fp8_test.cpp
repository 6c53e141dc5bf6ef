#include "peregrine/quant/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace peregrine {
namespace {

struct Format {
  const char* name;
  float (*decode)(std::uint8_t);
  std::uint8_t (*encode)(float);
  int man_bits;
  float max;
  std::uint8_t max_code;  // largest finite positive code
  float min_subnormal;
};
constexpr Format kFormats[] = {
    {"e4m3", fp8_e4m3_to_f32, f32_to_fp8_e4m3, 3, 448.0f, 0x7e, 0x1p-9f},
    {"e5m2", fp8_e5m2_to_f32, f32_to_fp8_e5m2, 2, 57344.0f, 0x7b, 0x1p-16f},
};

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  // NaNs re-encode to the canonical NaN 0x7f; E5M2's infinities saturate to ±57344 (the
  // encoders saturate, quant/fp8.h).
  for (const Format& f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float v = f.decode(code);
      if (std::isnan(v)) {
        EXPECT_EQ(f.encode(v), 0x7f) << f.name << " " << c;
        EXPECT_TRUE(std::isnan(f.decode(f.encode(v))));
      } else if (std::isinf(v)) {
        EXPECT_EQ(f.encode(v), (c & 0x80) | f.max_code) << f.name << " " << c;
      } else {
        EXPECT_EQ(f.encode(v), code) << f.name << " code " << c << " value " << v;
      }
    }
  }
}

TEST(Fp8, KnownValuesAndSpecialCodes) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0x07), 7 * 0x1p-9f);  // largest subnormal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);  // E4M3 has no infinities: exponent 15 is finite
  EXPECT_EQ(fp8_e5m2_to_f32(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x04), 0x1p-14f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x03), 3 * 0x1p-16f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7c), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_e5m2_to_f32(0xfc), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0x7d)));
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e5m2(-0.0f), 0x80);
  EXPECT_EQ(fp8_max(DType::kF8E4M3), 448.0f);
  EXPECT_EQ(fp8_max(DType::kF8E5M2), 57344.0f);
}

TEST(Fp8, MidpointsRoundToEvenAndOthersToNearest) {
  // Between every two adjacent finite codes of one sign (values increase with the code), the
  // midpoint goes to the even code; a little either side goes to the nearer one.
  for (const Format& f : kFormats) {
    for (int sign : {0x00, 0x80}) {
      for (int c = 0; c < f.max_code; ++c) {
        const auto lo = static_cast<std::uint8_t>(sign | c), hi = static_cast<std::uint8_t>(sign | (c + 1));
        const float a = f.decode(lo), b = f.decode(hi);
        const float mid = (a + b) / 2;  // exact: a and b are short binary fractions
        const std::uint8_t even = (c % 2 == 0) ? lo : hi;
        EXPECT_EQ(f.encode(mid), even) << f.name << " between codes " << int{lo} << " and " << int{hi};
        const float step = std::fabs(b - a);
        EXPECT_EQ(f.encode(a + (b - a) * 0.25f), lo) << f.name << " " << int{lo};
        EXPECT_EQ(f.encode(a + (b - a) * 0.75f), hi) << f.name << " " << int{hi};
        EXPECT_GT(step, 0.0f);
      }
    }
  }
}

TEST(Fp8, SaturatesAtTheLargestFiniteValue) {
  for (const Format& f : kFormats) {
    const float inf = std::numeric_limits<float>::infinity();
    for (float v : {f.max, f.max * 1.03f, f.max * 1.0625f, f.max * 1.1f, f.max * 2.0f, 1e30f, inf}) {
      EXPECT_EQ(f.encode(v), f.max_code) << f.name << " " << v;
      EXPECT_EQ(f.encode(-v), 0x80 | f.max_code) << f.name << " " << -v;
    }
    EXPECT_EQ(f.decode(f.encode(1e30f)), f.max);
  }
}

TEST(Fp8, SubnormalsAndUnderflow) {
  for (const Format& f : kFormats) {
    const float d = f.min_subnormal;
    EXPECT_EQ(f.encode(d), 0x01) << f.name;
    EXPECT_EQ(f.decode(0x01), d) << f.name;
    EXPECT_EQ(f.encode(d / 2), 0x00) << f.name;           // halfway to 0: even (0)
    EXPECT_EQ(f.encode(d * 0.51f), 0x01) << f.name;
    EXPECT_EQ(f.encode(d * 1.5f), 0x02) << f.name;        // halfway 1 → 2: even (2)
    EXPECT_EQ(f.encode(d * 2.5f), 0x02) << f.name;        // halfway 2 → 3: even (2)
    EXPECT_EQ(f.encode(-d * 3.0f), 0x83) << f.name;
    EXPECT_EQ(f.encode(1e-30f), 0x00) << f.name;
    EXPECT_EQ(f.encode(-1e-30f), 0x80) << f.name;
    // The largest subnormal rounds up into the smallest normal.
    const std::uint8_t min_normal = static_cast<std::uint8_t>(1 << f.man_bits);
    const float top = f.decode(static_cast<std::uint8_t>(min_normal - 1));
    EXPECT_EQ(f.encode((top + f.decode(min_normal)) / 2), min_normal) << f.name;  // even
  }
}

}  // namespace
}  // namespace peregrine

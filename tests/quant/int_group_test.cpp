#include "peregrine/quant/int_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

float f16_round(float x) { return f16_to_f32(f32_to_f16(x)); }

// A random row consistent with p: f16-exact scales, zeros of the right kind, codes < 2^bits.
IntRow random_row(const QuantParams& p, std::int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, (1 << p.bits) - 1);
  std::uniform_real_distribution<float> scale(0.0f, 4.0f);
  IntRow row;
  row.groups.resize(static_cast<std::size_t>(int_group_count(p, n)));
  for (auto& g : row.groups) g = {f16_round(scale(rng)), p.asymmetric ? code(rng) : 1 << (p.bits - 1)};
  row.codes.resize(static_cast<std::size_t>(n));
  for (auto& c : row.codes) c = static_cast<std::uint8_t>(code(rng));
  return row;
}

TEST(IntGroup, PackUnpackRoundTripForEveryBitWidth) {
  std::mt19937 rng(1);
  for (int bits : {2, 3, 4, 8}) {
    for (bool asymmetric : {false, true}) {
      for (std::int64_t n : {1, 7, 8, 9, 172, 300}) {
        for (std::int64_t group : {std::int64_t{7}, std::int64_t{32}, n}) {
          const QuantParams p{bits, group, asymmetric};
          const IntRow row = random_row(p, n, rng);
          const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(n));
          EXPECT_EQ(rb, static_cast<std::size_t>(int_group_count(p, n)) * (asymmetric ? 3 : 2) +
                            static_cast<std::size_t>((n * bits + 7) / 8));
          std::vector<std::uint8_t> buf(rb + 8, 0xa5);  // sentinel bytes after the row
          pack_int_row(p, row, buf.data());
          EXPECT_TRUE(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(rb), buf.end(), [](std::uint8_t b) { return b == 0xa5; }))
              << "pack wrote past the row";
          const IntRow back = unpack_int_row(p, buf.data(), n);
          ASSERT_EQ(back.codes, row.codes) << "bits " << bits << " n " << n << " group " << group;
          ASSERT_EQ(back.groups.size(), row.groups.size());
          for (std::size_t g = 0; g < row.groups.size(); ++g) {
            EXPECT_EQ(back.groups[g].scale, row.groups[g].scale);
            EXPECT_EQ(back.groups[g].zero, row.groups[g].zero);
          }
          std::vector<float> decoded(static_cast<std::size_t>(n));
          dequantize_int_row(p, buf.data(), decoded);
          for (std::int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(decoded[static_cast<std::size_t>(i)],
                      dequantize_code(row.codes[static_cast<std::size_t>(i)], row.groups[static_cast<std::size_t>(i / group)]));
          }
        }
      }
    }
  }
}

TEST(IntGroup, CodesArePackedLsbFirstAcrossBytes) {
  // 3 bits: 8 values in 3 bytes, value i at stream bits [3i, 3i+3).
  const QuantParams p3{3, 8, false};
  IntRow row{{{1.0f, 4}}, {1, 2, 3, 4, 5, 6, 7, 0}};
  std::vector<std::uint8_t> buf(*row_bytes(DType::kInt, p3, 8));
  pack_int_row(p3, row, buf.data());
  EXPECT_EQ(buf, (std::vector<std::uint8_t>{0x00, 0x3c, 0xd1, 0x58, 0x1f}));  // f16 1.0, codes
  // 4 bits: byte i/2, low nibble for even i. 2 bits: four values per byte from bit 0.
  const QuantParams p4{4, 4, true}, p2{2, 4, true};
  row = {{{0.5f, 3}}, {1, 2, 15, 4}};
  buf.assign(*row_bytes(DType::kInt, p4, 4), 0);
  pack_int_row(p4, row, buf.data());
  EXPECT_EQ(buf, (std::vector<std::uint8_t>{0x00, 0x38, 3, 0x21, 0x4f}));
  row = {{{0.5f, 1}}, {1, 2, 3, 0}};
  buf.assign(*row_bytes(DType::kInt, p2, 4), 0);
  pack_int_row(p2, row, buf.data());
  EXPECT_EQ(buf, (std::vector<std::uint8_t>{0x00, 0x38, 1, 0x39}));
}

TEST(IntGroup, SymmetricScaleIsAbsmaxOverHalfRange) {
  const std::vector<float> v = {-3.0f, 1.5f, 2.0f, 0.25f};
  for (int bits : {2, 3, 4, 8}) {
    const GroupScale g = rtn_group_scale(v, bits, false);
    EXPECT_EQ(g.scale, f16_round(3.0f / static_cast<float>((1 << (bits - 1)) - 1))) << bits;
    EXPECT_EQ(g.zero, 1 << (bits - 1)) << bits;
    // The extreme value takes the lowest used code 1; nothing is clamped.
    EXPECT_EQ(quantize_code(-3.0f, g, bits), 1) << bits;
  }
}

TEST(IntGroup, AsymmetricScaleSpansMinToMaxIncludingZero) {
  GroupScale g = rtn_group_scale(std::vector<float>{-1.0f, 3.0f, 0.5f}, 4, true);
  EXPECT_EQ(g.scale, f16_round(4.0f / 15.0f));
  EXPECT_EQ(g.zero, static_cast<int>(std::lround(1.0f / g.scale)));
  EXPECT_EQ(quantize_code(-1.0f, g, 4), 0);
  EXPECT_EQ(quantize_code(3.0f, g, 4), 15);
  // All positive: the range starts at 0 (zero point 0); all negative: ends at 0 (zero 2^b − 1).
  g = rtn_group_scale(std::vector<float>{2.0f, 5.0f}, 4, true);
  EXPECT_EQ(g.scale, f16_round(5.0f / 15.0f));
  EXPECT_EQ(g.zero, 0);
  g = rtn_group_scale(std::vector<float>{-2.0f, -6.0f}, 8, true);
  EXPECT_EQ(g.scale, f16_round(6.0f / 255.0f));
  EXPECT_EQ(g.zero, 255);
  // clip shrinks the range before the scale is taken (AWQ's clipping search).
  EXPECT_EQ(rtn_group_scale(std::vector<float>{-1.0f, 3.0f}, 4, true, 0.5f).scale, f16_round(2.0f / 15.0f));
  EXPECT_EQ(rtn_group_scale(std::vector<float>{-1.0f, 3.0f}, 4, false, 0.5f).scale, f16_round(1.5f / 7.0f));
}

TEST(IntGroup, AllZeroGroupHasZeroScaleAndDecodesToZero) {
  const std::vector<float> zeros(5, 0.0f);
  for (bool asymmetric : {false, true}) {
    const GroupScale g = rtn_group_scale(zeros, 4, asymmetric);
    EXPECT_EQ(g.scale, 0.0f);
    EXPECT_EQ(quantize_code(0.0f, g, 4), g.zero);
    EXPECT_EQ(quantize_code(123.0f, g, 4), g.zero);
    EXPECT_EQ(dequantize_code(quantize_code(0.0f, g, 4), g), 0.0f);
  }
  const QuantParams p{4, 4, false};
  const auto bytes = quantize_int_rtn(std::vector<float>{0, 0, 0, 0, 1, -1, 0.5f, 0}, 1, 8, p);
  std::vector<float> out(8);
  dequantize_int_row(p, bytes.data(), out);
  const float s = f16_round(1.0f / 7.0f);  // the second group's scale; 0.5/s = 3.5009 → 4
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 0, 7 * s, -7 * s, 4 * s, 0}));
}

TEST(IntGroup, QuantizeCodeRoundsHalfAwayAndClamps) {
  const GroupScale g{0.5f, 8};
  EXPECT_EQ(quantize_code(1.25f, g, 4), 11);   // 2.5 → 3
  EXPECT_EQ(quantize_code(-1.25f, g, 4), 5);   // −2.5 → −3
  EXPECT_EQ(quantize_code(0.2f, g, 4), 8);
  EXPECT_EQ(quantize_code(100.0f, g, 4), 15);  // clamped to 2^bits − 1
  EXPECT_EQ(quantize_code(-100.0f, g, 4), 0);  // clamped to 0
  EXPECT_EQ(quantize_code(1e30f, GroupScale{1.0f, 128}, 8), 255);
  EXPECT_EQ(quantize_code(-4.0f, GroupScale{1.0f, 2}, 2), 0);
}

TEST(IntGroup, RtnOfAMatrixWithPartialLastGroupWithinHalfAStep) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t rows = 3, cols = 172;
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (auto& v : w) v = normal(rng);
  for (int bits : {2, 3, 4, 8}) {
    for (bool asymmetric : {false, true}) {
      const QuantParams p{bits, 64, asymmetric};  // groups of 64, 64 and 44
      const auto bytes = quantize_int_rtn(w, rows, cols, p);
      const std::size_t rb = *row_bytes(DType::kInt, p, cols);
      ASSERT_EQ(bytes.size(), rb * static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) {
        const IntRow row = unpack_int_row(p, bytes.data() + static_cast<std::size_t>(r) * rb, cols);
        ASSERT_EQ(row.groups.size(), 3u);
        for (std::size_t g = 0; g < 3; ++g) {
          const std::size_t begin = g * 64, len = std::min<std::size_t>(64, static_cast<std::size_t>(cols) - begin);
          const std::span<const float> values(w.data() + r * cols + static_cast<std::ptrdiff_t>(begin), len);
          const GroupScale expected = rtn_group_scale(values, bits, asymmetric);
          EXPECT_EQ(row.groups[g].scale, expected.scale);
          EXPECT_EQ(row.groups[g].zero, expected.zero);
          for (std::size_t i = 0; i < len; ++i) {
            EXPECT_EQ(row.codes[begin + i], quantize_code(values[i], expected, bits));
            // Symmetric groups never clamp (|x|/scale <= 2^(b−1) − 1 up to the f16 rounding).
            if (!asymmetric) {
              EXPECT_LE(std::fabs(values[i] - dequantize_code(row.codes[begin + i], expected)), 0.5f * expected.scale * 1.001f);
            }
          }
        }
      }
    }
  }
}

TEST(IntGroup, PerTensorRepeatsOneScaleInEveryRow) {
  const std::vector<float> w = {1.0f, -2.0f, 0.5f, 4.0f, -7.0f, 3.0f};
  const QuantParams p{4, 3, true};
  const auto bytes = quantize_int_rtn(w, 2, 3, p, /*per_tensor=*/true);
  const GroupScale whole = rtn_group_scale(w, 4, true);
  const std::size_t rb = *row_bytes(DType::kInt, p, 3);
  for (int r = 0; r < 2; ++r) {
    const IntRow row = unpack_int_row(p, bytes.data() + static_cast<std::size_t>(r) * rb, 3);
    EXPECT_EQ(row.groups[0].scale, whole.scale);
    EXPECT_EQ(row.groups[0].zero, whole.zero);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(row.codes[static_cast<std::size_t>(i)], quantize_code(w[static_cast<std::size_t>(r * 3 + i)], whole, 4));
  }
}

}  // namespace
}  // namespace peregrine

#include "peregrine/quant/dequantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/fp8.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

void put_u16(std::vector<std::uint8_t>& buf, std::uint16_t v) {
  const auto at = buf.size();
  buf.resize(at + 2);
  std::memcpy(buf.data() + at, &v, 2);
}

TEST(Dequantize, Q8_0BlocksDecodeToScaleTimesQuant) {
  // Two blocks with exact scales 0.5 and -0.25 (representable in f16) and known int8 quants.
  std::vector<std::uint8_t> buf;
  const float scales[2] = {0.5f, -0.25f};
  for (int b = 0; b < 2; ++b) {
    put_u16(buf, f32_to_f16(scales[b]));
    for (int j = 0; j < 32; ++j) {
      const int q = b == 0 ? j * 8 - 128 : 127 - j * 3;  // spans -128 .. 127
      buf.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(q)));
    }
  }
  ASSERT_EQ(buf.size(), 2u * 34u);
  std::vector<float> out(64, -999.0f);
  dequantize(DType::kQ8_0, buf.data(), out);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[static_cast<std::size_t>(j)], 0.5f * static_cast<float>(j * 8 - 128)) << j;
    EXPECT_EQ(out[static_cast<std::size_t>(32 + j)], -0.25f * static_cast<float>(127 - j * 3)) << j;
  }
}

TEST(Dequantize, Q4_0NibbleOrderLowFirstThenHigh) {
  // Byte j holds value j in its low nibble and value j+16 in its high nibble; x = d*(nib-8).
  std::vector<std::uint8_t> buf;
  put_u16(buf, f32_to_f16(2.0f));
  for (int j = 0; j < 16; ++j) {
    const int lo = j;           // value j      → nibble j      → 2*(j-8)
    const int hi = 15 - j;      // value j + 16 → nibble 15 - j → 2*(7-j)
    buf.push_back(static_cast<std::uint8_t>(lo | (hi << 4)));
  }
  // Second block: scale 0.125, all bytes 0x8f: low nibble 15 (→ +7/8), high 8 (→ 0).
  put_u16(buf, f32_to_f16(0.125f));
  for (int j = 0; j < 16; ++j) buf.push_back(0x8f);
  ASSERT_EQ(buf.size(), 2u * 18u);

  std::vector<float> out(64, -999.0f);
  dequantize(DType::kQ4_0, buf.data(), out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[static_cast<std::size_t>(j)], 2.0f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(out[static_cast<std::size_t>(j + 16)], 2.0f * static_cast<float>(7 - j)) << j;
    EXPECT_EQ(out[static_cast<std::size_t>(32 + j)], 0.875f) << j;
    EXPECT_EQ(out[static_cast<std::size_t>(48 + j)], 0.0f) << j;
  }
}

TEST(Dequantize, Q4_0ExtremeNibbles) {
  // nibble 0 → -8d, nibble 15 → +7d; subnormal f16 scale is honoured.
  std::vector<std::uint8_t> buf;
  const std::uint16_t d_bits = 0x0003;  // 3 * 2^-24
  put_u16(buf, d_bits);
  for (int j = 0; j < 16; ++j) buf.push_back(0xf0);  // low 0, high 15
  std::vector<float> out(32);
  dequantize(DType::kQ4_0, buf.data(), out);
  const float d = f16_to_f32(d_bits);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[static_cast<std::size_t>(j)], -8.0f * d);
    EXPECT_EQ(out[static_cast<std::size_t>(j + 16)], 7.0f * d);
  }
}

TEST(Dequantize, F32RowIsCopied) {
  const std::vector<float> src = {1.5f, -0.0f, 3e-39f, -7.25f, 1e30f, 0.1f, 42.0f};
  std::vector<float> out(src.size());
  dequantize(DType::kF32, src.data(), out);
  for (std::size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(std::memcmp(&out[i], &src[i], 4), 0) << i;
  }
}

TEST(Dequantize, F16AndBF16RowsMatchScalarConversion) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> any(0, 0xffff);
  for (std::size_t n : {1u, 7u, 33u, 172u}) {
    std::vector<std::uint16_t> h(n);
    for (auto& v : h) {
      do v = static_cast<std::uint16_t>(any(rng));
      while ((v & 0x7c00) == 0x7c00 || (v & 0x7f80) == 0x7f80);  // finite in both formats
    }
    // Unaligned source (offset by one byte) must work too: rows in a file need not be aligned.
    std::vector<std::uint8_t> bytes(1 + 2 * n);
    std::memcpy(bytes.data() + 1, h.data(), 2 * n);
    std::vector<float> f16(n), bf16(n);
    dequantize(DType::kF16, bytes.data() + 1, f16);
    dequantize(DType::kBF16, bytes.data() + 1, bf16);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(f16[i], f16_to_f32(h[i])) << i;
      EXPECT_EQ(bf16[i], bf16_to_f32(h[i])) << i;
    }
  }
  // A few exact known values.
  const std::uint16_t known[] = {0x3c00, 0xc500, 0x3f80};
  std::vector<float> out(2);
  dequantize(DType::kF16, known, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  std::vector<float> outb(1);
  dequantize(DType::kBF16, known + 2, outb);
  EXPECT_EQ(outb[0], 1.0f);
}

std::vector<float> random_row(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

float row_scale(const std::vector<std::uint8_t>& bytes) {
  float s;
  std::memcpy(&s, bytes.data(), sizeof s);
  return s;
}

TEST(Dequantize, I8RowRoundTripsThroughRtnWithinHalfAStep) {
  std::mt19937 rng(3);
  for (std::size_t n : {1u, 7u, 172u}) {
    const auto x = random_row(n, rng);
    std::vector<std::uint8_t> bytes(*dtype_row_bytes(DType::kI8, n));
    quantize_rtn(DType::kI8, x, bytes.data());
    const float s = row_scale(bytes);
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(s, amax / 127.0f);
    std::vector<float> out(n);
    dequantize(DType::kI8, bytes.data(), out);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(out[i], s * static_cast<float>(static_cast<std::int8_t>(bytes[kRowScaleBytes + i])));
      EXPECT_LE(std::fabs(out[i] - x[i]), 0.5f * s * 1.0001f) << i;
    }
  }
}

// FP8 rows: s = absmax / fp8_max, so x/s is in range; RTN to a format with m mantissa bits errs
// by at most half a step: 2^-(m+1) relative for normal values, half the subnormal spacing d
// (in units of s) below; the decode s·fp8(f) rounds once more (2^-24).
TEST(Dequantize, Fp8RowsRoundTripThroughRtnWithinHalfAStep) {
  std::mt19937 rng(4);
  const struct {
    DType t;
    int man_bits;
    float min_subnormal;
    float (*decode)(std::uint8_t);
  } formats[] = {{DType::kF8E4M3, 3, 0x1p-9f, fp8_e4m3_to_f32}, {DType::kF8E5M2, 2, 0x1p-16f, fp8_e5m2_to_f32}};
  for (const auto& f : formats) {
    for (std::size_t n : {1u, 7u, 172u}) {
      auto x = random_row(n, rng);
      if (n > 3) x[2] = 1e-6f;  // deep in the subnormal range after scaling
      std::vector<std::uint8_t> bytes(*dtype_row_bytes(f.t, n));
      quantize_rtn(f.t, x, bytes.data());
      const float s = row_scale(bytes);
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      EXPECT_EQ(s, amax / fp8_max(f.t));
      std::vector<float> out(n);
      dequantize(f.t, bytes.data(), out);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(out[i], s * f.decode(bytes[kRowScaleBytes + i])) << i;
        const double bound = std::max(std::ldexp(static_cast<double>(std::fabs(x[i])), -(f.man_bits + 1)), 0.5 * f.min_subnormal * s);
        EXPECT_LE(std::fabs(out[i] - x[i]), bound * 1.0001 + std::ldexp(std::fabs(x[i]), -23))
            << dtype_name(f.t) << " " << i << " x " << x[i];
      }
    }
  }
}

TEST(Dequantize, RowScaledAllZeroRowsHaveZeroScale) {
  const std::vector<float> zeros(5, 0.0f);
  for (DType t : {DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    std::vector<std::uint8_t> bytes(*dtype_row_bytes(t, zeros.size()));
    quantize_rtn(t, zeros, bytes.data());
    EXPECT_EQ(row_scale(bytes), 0.0f) << dtype_name(t);
    std::vector<float> out(zeros.size(), 1.0f);
    dequantize(t, bytes.data(), out);
    EXPECT_EQ(out, zeros) << dtype_name(t);
  }
}

TEST(Dequantize, RowOfATensorInEveryRowFormatIncludingInt) {
  // dequantize_row finds row r at r · row_bytes and decodes kInt rows with their QuantParams.
  std::mt19937 rng(5);
  const std::int64_t rows = 3, cols = 172;
  const auto w = random_row(static_cast<std::size_t>(rows * cols), rng);
  const QuantParams p{3, 64, true};
  const auto bytes = quantize_int_rtn(w, rows, cols, p);
  const TensorView view{"w", DType::kInt, {rows, cols}, bytes.data(), bytes.size(), p};
  ASSERT_EQ(view.row_bytes(), row_bytes(DType::kInt, p, cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> out(cols), expected(cols);
    dequantize_row(view, r, out);
    dequantize_int_row(p, bytes.data() + static_cast<std::size_t>(r) * *view.row_bytes(), expected);
    EXPECT_EQ(out, expected) << r;
  }
  for (DType t : {DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    const std::size_t rb = *dtype_row_bytes(t, cols);
    std::vector<std::uint8_t> fb(rb * rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      quantize_rtn(t, std::span<const float>(w).subspan(static_cast<std::size_t>(r * cols), cols), fb.data() + static_cast<std::size_t>(r) * rb);
    }
    const TensorView fv{"w", t, {rows, cols}, fb.data(), fb.size()};
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<float> out(cols), expected(cols);
      dequantize_row(fv, r, out);
      dequantize(t, fb.data() + static_cast<std::size_t>(r) * rb, expected);
      EXPECT_EQ(out, expected) << dtype_name(t) << " " << r;
    }
  }
}

}  // namespace
}  // namespace peregrine

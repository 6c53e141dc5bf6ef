// The ggml block encoders beyond Q8_0 / Q4_0 (quantize_rtn → src/quant/ggml_quantize.cpp): every
// format round-trips through its decoder within the format's error bound on fresh random rows,
// all-zero blocks decode to exact zeros, constant blocks and single outliers stay within the bound,
// and values on a format's grid come back exactly. Bit-exactness with llama.cpp is
// gguf_quantize_test's job (real files); these check the encoders' behaviour on hard inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/ggml_blocks.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

struct Format {
  DType dtype;
  float bound;  // largest |decoded − x| as a fraction of the block's max |x| (block: 32 or 256)
};

// Per format, from its step against the block's max |x| (200 seeds of the rows below measured
// 0.067, 0.0625, 0.033, 0.117, 0.381, 0.201, 0.087, 0.047, 0.016, 0.098):
// Q4_1 / Q5_1 half a step of range / 15 (31), range <= 2·max; Q5_0 one step of max / 16 (the
// extreme opposite the scale's sign is clamped to code 31); IQ4_NL / IQ4_XS the grid's end gap
// (113 vs 127, of d ≈ max / 127) plus the searched d; Q2_K half a step of range / 3; Q3_K most
// of a step of max / 4 (the x²-weighted search favours the large values); Q4_K / Q5_K / Q6_K
// half a step plus the 6- (8-) bit quantization of the sub-block scales and offsets.
// Magnitudes keep the f16 super-block scales normal numbers (below about 6e-5 they lose
// precision: a limit of the format, not of the encoder).
constexpr Format kFormats[] = {
    {DType::kQ4_1, 0.07f},  {DType::kQ5_0, 0.065f}, {DType::kQ5_1, 0.035f}, {DType::kIQ4_NL, 0.13f},
    {DType::kQ2_K, 0.42f},  {DType::kQ3_K, 0.25f},  {DType::kQ4_K, 0.1f},   {DType::kQ5_K, 0.055f},
    {DType::kQ6_K, 0.02f},  {DType::kIQ4_XS, 0.13f},
};

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  std::vector<std::uint8_t> bytes(*dtype_row_bytes(t, x.size()), 0xcd);
  quantize_rtn(t, x, bytes.data());
  std::vector<float> y(x.size());
  dequantize(t, bytes.data(), y);
  return y;
}

// Checks every value of x against its decoding, block by block.
void expect_within_bound(const Format& f, const std::vector<float>& x, const char* what) {
  const std::vector<float> y = round_trip(f.dtype, x);
  const std::size_t block = dtype_block_size(f.dtype);
  for (std::size_t b = 0; b < x.size() / block; ++b) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(x[b * block + j]));
    for (std::size_t j = 0; j < block; ++j) {
      const std::size_t i = b * block + j;
      ASSERT_LE(std::fabs(y[i] - x[i]), f.bound * amax + 1e-30f)
          << dtype_name(f.dtype) << " " << what << ": block " << b << " value " << j << " x " << x[i] << " decoded " << y[i];
    }
  }
}

class GgmlQuantizeTest : public ::testing::TestWithParam<Format> {
 protected:
  std::size_t block() const { return dtype_block_size(GetParam().dtype); }
};

TEST_P(GgmlQuantizeTest, RandomRowsRoundTripWithinTheBound) {
  std::mt19937 rng(static_cast<std::uint32_t>(GetParam().dtype) + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::student_t_distribution<float> heavy(3.0f);  // heavier tails, like real weights
  for (float scale : {0.05f, 1.0f, 300.0f}) {
    std::vector<float> x(4 * 256);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = scale * (i < x.size() / 2 ? normal(rng) : heavy(rng));
    expect_within_bound(GetParam(), x, "random");
  }
}

TEST_P(GgmlQuantizeTest, AllZeroBlocksDecodeToZero) {
  std::vector<float> x(2 * 256, 0.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 256; i < x.size(); ++i) x[i] = normal(rng);  // a non-zero super-block after
  const std::vector<float> y = round_trip(GetParam().dtype, x);
  for (std::size_t i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f) << i;
  expect_within_bound(GetParam(), x, "zeros then random");
}

TEST_P(GgmlQuantizeTest, ConstantBlocksStayWithinTheBound) {
  for (float c : {1.0f, -0.37f, 0.05f, 65504.0f / 128.0f}) {
    expect_within_bound(GetParam(), std::vector<float>(256, c), "constant");
  }
}

TEST_P(GgmlQuantizeTest, SingleOutliersStayWithinTheBound) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (std::size_t pos : {std::size_t{0}, std::size_t{17}, std::size_t{255}}) {
    std::vector<float> x(256);
    for (float& v : x) v = normal(rng);
    x[pos] = 25.0f;
    const std::vector<float> y = round_trip(GetParam().dtype, x);
    EXPECT_NEAR(y[pos], x[pos], GetParam().bound * 25.0f) << "outlier at " << pos;
    expect_within_bound(GetParam(), x, "outlier");
    x[pos] = -25.0f;
    expect_within_bound(GetParam(), x, "negative outlier");
    std::vector<float> lone(256, 0.0f);  // the outlier alone in a block of zeros
    lone[pos] = 3.0f;
    expect_within_bound(GetParam(), lone, "lone outlier");
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, GgmlQuantizeTest, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<Format>& info) { return std::string(dtype_name(info.param.dtype)); });

TEST(GgmlQuantize, ValuesOnTheIq4GridComeBackExactly) {
  // x = d · kIq4nlValues[k] with d a power of two: one of the searched scales is d itself.
  std::vector<float> x(256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(ggml::kIq4nlValues[(i * 7) % 16]) / 128.0f;
  x[3] = static_cast<float>(ggml::kIq4nlValues[0]) / 128.0f;  // every block holds the largest magnitude
  for (std::size_t b = 0; b < 8; ++b) x[32 * b] = x[3];
  EXPECT_EQ(round_trip(DType::kIQ4_NL, x), x);
  EXPECT_EQ(round_trip(DType::kIQ4_XS, x), x);
}

TEST(GgmlQuantize, Q4_1AndQ5_1ReproduceAnEvenlySpacedBlock) {
  // min + d·k with d = 1/16 and min = -1: the codes are exact, d and min are f16-exact.
  std::vector<float> x(32);
  for (std::size_t j = 0; j < 32; ++j) x[j] = -1.0f + static_cast<float>(j % 16) / 16.0f;
  x[5] = -1.0f + 15.0f / 16.0f;
  EXPECT_EQ(round_trip(DType::kQ4_1, x), x);
  std::vector<float> y(32);
  for (std::size_t j = 0; j < 32; ++j) y[j] = -1.0f + static_cast<float>(j) / 32.0f;
  y[0] = -1.0f;
  y[31] = -1.0f + 31.0f / 32.0f;
  EXPECT_EQ(round_trip(DType::kQ5_1, y), y);
}

}  // namespace
}  // namespace peregrine

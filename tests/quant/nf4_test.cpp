// NF4 with double quantization (quant/nf4.h, QLoRA §3): the codebook is bitsandbytes'
// create_normal_map (normal quantiles, recomputed here with an independent inverse CDF), the
// absmax map is its create_dynamic_map; a real stories260K weight and Gaussian values round-trip
// within the bound the codebook's gaps and the double quantization give; the double-quantized
// absmaxes are within half the map's widest gap of their group's scale; bit layout, bits per
// weight and errors.
#include "peregrine/quant/nf4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include <random>

#include "peregrine/formats/model_file.h"
#include "peregrine/quant/float_model.h"
#include "test_models.h"

namespace peregrine {
namespace {

// Φ⁻¹(p) by bisection on Φ(x) = erfc(−x/√2) / 2.
double normal_ppf(double p) {
  double lo = -10.0, hi = 10.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2.0;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2.0;
}

double widest_half_gap(std::span<const float> table) {
  double g = 0.0;
  for (std::size_t i = 1; i < table.size(); ++i) g = std::max(g, (static_cast<double>(table[i]) - table[i - 1]) / 2.0);
  return g;
}

TEST(Nf4, CodebookIsTheNormalQuantilesOfQlora) {
  // create_normal_map(offset=0.9677083): 8 positive quantiles of linspace(offset, 0.5, 9), 7
  // negative of linspace(offset, 0.5, 8), 0, all divided by the largest.
  constexpr double offset = 0.9677083;
  const double top = normal_ppf(offset);
  std::vector<double> want{0.0};
  for (int i = 0; i < 8; ++i) want.push_back(normal_ppf(offset + (0.5 - offset) * i / 8.0) / top);
  for (int i = 0; i < 7; ++i) want.push_back(-normal_ppf(offset + (0.5 - offset) * i / 7.0) / top);
  std::sort(want.begin(), want.end());
  ASSERT_EQ(want.size(), kNf4Codebook.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(kNf4Codebook[i], want[i], 2e-6) << i;
  EXPECT_EQ(kNf4Codebook[0], -1.0f);
  EXPECT_EQ(kNf4Codebook[7], 0.0f);
  EXPECT_EQ(kNf4Codebook[15], 1.0f);
  EXPECT_NEAR(widest_half_gap(kNf4Codebook), 0.15190, 1e-5);  // between −1 and −0.6962
}

TEST(Nf4, AbsmaxMapIsBitsandbytesDynamicMap) {
  const auto& map = nf4_absmax_map();
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(std::adjacent_find(map.begin(), map.end()), map.end()) << "256 distinct values";
  EXPECT_EQ(map.back(), 1.0f);
  EXPECT_NEAR(map.front(), -(0.1 + 0.9 * 63.5 / 64.0), 1e-7);  // the largest midpoint of the top decade
  EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
  EXPECT_NEAR(map[128], 0.55e-6, 1e-12);  // the smallest positive value: 10⁻⁶ · (0.1 + 1) / 2
  EXPECT_NEAR(widest_half_gap(map), 0.9 / 64 / 2, 1e-6);  // the top decade's steps of 0.9 / 64
}

// Every weight within c₂ · (codebook half-gap) + |c₂ − ĉ₂|, every absmax within half the map's
// widest gap of its group's scale; returns the RMS error relative to the RMS of the values.
double check_round_trip(std::span<const float> w, std::vector<std::int64_t> shape) {
  auto q = nf4_quantize(w, shape);
  EXPECT_TRUE(q) << q.status().message();
  if (!q) return INFINITY;
  const std::vector<float> back = nf4_dequantize(*q), absmax = nf4_block_absmax(*q);
  EXPECT_EQ(back.size(), w.size());
  const double code_gap = widest_half_gap(kNf4Codebook), map_gap = widest_half_gap(nf4_absmax_map());
  double err2 = 0.0, sum2 = 0.0;
  for (std::int64_t b = 0; b < q->n_blocks(); ++b) {
    const std::size_t begin = static_cast<std::size_t>(b * kNf4BlockSize), end = std::min(w.size(), begin + kNf4BlockSize);
    double c2 = 0.0;
    for (std::size_t i = begin; i < end; ++i) c2 = std::max(c2, std::fabs(static_cast<double>(w[i])));
    const double absmax_err = std::fabs(absmax[static_cast<std::size_t>(b)] - c2);
    EXPECT_LE(absmax_err, map_gap * q->group_absmax[static_cast<std::size_t>(b / kNf4AbsmaxGroup)] + 1e-7) << "block " << b;
    for (std::size_t i = begin; i < end; ++i) {
      const double e = std::fabs(static_cast<double>(back[i]) - w[i]);
      EXPECT_LE(e, c2 * code_gap + absmax_err + 1e-7) << "weight " << i;
      err2 += e * e;
      sum2 += static_cast<double>(w[i]) * w[i];
    }
  }
  return std::sqrt(err2 / sum2);
}

TEST(Nf4, RealAndGaussianWeightsRoundTripWithinTheBound) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  auto f = FloatModel::from(*file);
  ASSERT_TRUE(f);
  for (const char* name : {"blk.0.ffn_up.weight", "blk.3.attn_q.weight", "blk.4.ffn_down.weight"}) {
    const double rel = check_round_trip(f->tensor(name), f->shape(name));
    EXPECT_LT(rel, 0.12) << name;  // 4-bit: roughly a tenth of the signal
    EXPECT_GT(rel, 0.01) << name;
  }
  // 70,000 N(0, 1) values: 1,094 blocks in 5 groups of absmaxes, the last block short.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(70000);
  for (float& v : g) v = normal(rng);
  EXPECT_LT(check_round_trip(g, {70000}), 0.11);
}

TEST(Nf4, LayoutBitsPerWeightAndExactValues) {
  // One block: its absmax is the mean, so it comes back exact, and so do codebook multiples.
  std::vector<float> w(33);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * kNf4Codebook[(i * 5) % 16];
  auto q = nf4_quantize(w, {3, 11});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->codes.size(), 17u);  // ceil(33 / 2)
  EXPECT_EQ(q->n_blocks(), 1);
  EXPECT_EQ(q->codes[0] >> 4, 0);         // w[0] = 0.5 · codebook[0]: high nibble first
  EXPECT_EQ(q->codes[0] & 0x0f, 5);       // w[1] = 0.5 · codebook[5]
  EXPECT_EQ(q->codes[16] >> 4, (32 * 5) % 16);
  EXPECT_EQ(q->codes[16] & 0x0f, 0);      // padding nibble
  EXPECT_EQ(nf4_dequantize(*q), w);
  // A block of zeros stays zero beside non-zero blocks.
  std::vector<float> z(128, 0.0f);
  z[100] = 3.0f;
  auto qz = nf4_quantize(z, {128});
  ASSERT_TRUE(qz);
  const std::vector<float> zb = nf4_dequantize(*qz);
  EXPECT_TRUE(std::all_of(zb.begin(), zb.begin() + 64, [](float v) { return v == 0.0f; }));
  // 4 + 8/64 + 32/(64·256) bits per weight (QLoRA §3: 0.127 bits of constants), plus the mean.
  auto big = nf4_quantize(std::vector<float>(64 * 256 * 4, 1.0f), {256, 256});
  ASSERT_TRUE(big);
  EXPECT_NEAR(big->bits_per_weight(), 4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / (64 * 256 * 4), 1e-12);
}

TEST(Nf4, BadInputsAreErrors) {
  EXPECT_EQ(nf4_quantize(std::vector<float>(10, 1.0f), {3, 3}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(nf4_quantize({}, {0}).status().code(), ErrorCode::kInvalidArgument);
  std::vector<float> w(8, 1.0f);
  w[3] = NAN;
  EXPECT_EQ(nf4_quantize(w, {8}).status().code(), ErrorCode::kInvalidArgument);
}

// The engine's row format (DType::kNF4): a row decodes to exactly nf4_dequantize's values of
// that row quantized as one tensor, in nf4_row_bytes bytes; a non-finite row decodes to NaN.
TEST(Nf4, RowFormatDecodesToTheTensorQuantizersValues) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::int64_t n : {64, 192, 64 * 257}) {
    std::vector<float> row(static_cast<std::size_t>(n));
    for (float& v : row) v = normal(rng);
    const std::size_t bytes = *nf4_row_bytes(static_cast<std::uint64_t>(n));
    EXPECT_EQ(bytes, static_cast<std::size_t>(4 + 4 * ((n / 64 + 255) / 256) + n / 64 + n / 2));
    std::vector<std::uint8_t> packed(bytes);
    nf4_encode_row(row, packed.data());
    std::vector<float> decoded(static_cast<std::size_t>(n));
    nf4_decode_row(packed.data(), decoded);
    auto t = nf4_quantize(row, {n});
    ASSERT_TRUE(t);
    EXPECT_EQ(decoded, nf4_dequantize(*t)) << n;
  }
  EXPECT_FALSE(nf4_row_bytes(100));
  EXPECT_FALSE(nf4_row_bytes(0));
  std::vector<float> bad(64, 0.5f);
  bad[3] = std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> packed(*nf4_row_bytes(64));
  nf4_encode_row(bad, packed.data());
  std::vector<float> decoded(64);
  nf4_decode_row(packed.data(), decoded);
  EXPECT_TRUE(std::isnan(decoded[0]));
}

}  // namespace
}  // namespace peregrine

// smoothquant_scales: Eq. 4 of Xiao et al. 2023 on a hand example (zero statistics, clamping),
// argument errors, and on real stories260K activations: smoothing the attention input at α = 0.5
// lowers the error per-token int8 activation quantization causes in the q/k/v products.
#include "peregrine/quant/smoothquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "peregrine/quant/int_group.h"
#include "smoothing_test_util.h"

namespace peregrine {
namespace {

TEST(SmoothQuant, HandExampleFollowsEquation4) {
  // Channel maxima over both matrices: |W_j| = {1, 4, 6, 0}.
  const std::vector<float> w1 = {1.0f, -2.0f, 3.0f, 0.0f};
  const std::vector<float> w2 = {-0.5f, 0.5f, 1.0f, 0.0f,  //
                                 0.25f, 4.0f, -6.0f, 0.0f};
  const std::vector<std::span<const float>> ws = {w1, w2};
  const std::vector<std::int64_t> rows = {1, 2};
  const std::vector<float> act = {4.0f, 1.0f, 0.0f, 9.0f};
  auto half = smoothquant_scales(act, ws, rows, 4, 0.5f);
  ASSERT_TRUE(half) << half.status().message();
  // sqrt(4) / sqrt(1), sqrt(1) / sqrt(4), zero activation → 1, zero weight column → 1.
  EXPECT_FLOAT_EQ((*half)[0], 2.0f);
  EXPECT_FLOAT_EQ((*half)[1], 0.5f);
  EXPECT_EQ((*half)[2], 1.0f);
  EXPECT_EQ((*half)[3], 1.0f);
  auto three_quarters = smoothquant_scales(act, ws, rows, 4, 0.75f);
  ASSERT_TRUE(three_quarters);
  EXPECT_FLOAT_EQ((*three_quarters)[0], std::pow(4.0f, 0.75f));
  EXPECT_FLOAT_EQ((*three_quarters)[1], 1.0f / std::pow(4.0f, 0.25f));
  // α = 1: s = max|X_j|; α = 0: s = 1 / max|W_j|.
  auto all_act = smoothquant_scales(act, ws, rows, 4, 1.0f);
  ASSERT_TRUE(all_act);
  EXPECT_FLOAT_EQ((*all_act)[1], 1.0f);
  EXPECT_FLOAT_EQ((*all_act)[0], 4.0f);
  auto all_weight = smoothquant_scales(act, ws, rows, 4, 0.0f);
  ASSERT_TRUE(all_weight);
  EXPECT_FLOAT_EQ((*all_weight)[1], 0.25f);
  EXPECT_FLOAT_EQ((*all_weight)[2], 1.0f);
}

TEST(SmoothQuant, ScalesAreClampedTo1eMinus5And1e5) {
  const std::vector<float> w = {1e-7f, 1e8f};
  const std::vector<std::span<const float>> ws = {w};
  const std::vector<std::int64_t> rows = {1};
  auto s = smoothquant_scales(std::vector<float>{1e9f, 1e-8f}, ws, rows, 2, 0.5f);
  ASSERT_TRUE(s);
  EXPECT_FLOAT_EQ((*s)[0], 1e5f);   // sqrt(1e9 / 1e-7) = 1e8
  EXPECT_FLOAT_EQ((*s)[1], 1e-5f);  // sqrt(1e-8 / 1e8) = 1e-8
}

TEST(SmoothQuant, BadArgumentsAreInvalid) {
  const std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<float> nan_w = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  const std::vector<std::span<const float>> ws = {w}, none, bad_w = {nan_w};
  const std::vector<std::int64_t> rows = {2}, two_rows = {2, 2}, one_row = {1};
  const std::vector<float> act = {1.0f, 2.0f, 3.0f};
  const auto code = [](const Expected<std::vector<float>>& r) { return r ? ErrorCode::kOk : r.status().code(); };
  EXPECT_EQ(code(smoothquant_scales(act, ws, rows, 3, 0.5f)), ErrorCode::kOk);
  for (const float alpha : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_EQ(code(smoothquant_scales(act, ws, rows, 3, alpha)), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(code(smoothquant_scales(act, none, {}, 3, 0.5f)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(act, ws, two_rows, 3, 0.5f)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(act, ws, one_row, 3, 0.5f)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(act, ws, rows, 2, 0.5f)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(std::vector<float>{1.0f, 2.0f}, ws, rows, 3, 0.5f)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(std::vector<float>{1.0f, -2.0f, 3.0f}, ws, rows, 3, 0.5f)),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(smoothquant_scales(act, bad_w, one_row, 3, 0.5f)), ErrorCode::kInvalidArgument);
}

// x [n, width] rounded per token (row) to symmetric int8 (absmax / 127) and decoded.
std::vector<float> per_token_int8(std::span<const float> x, std::int64_t width) {
  const std::int64_t n = static_cast<std::int64_t>(x.size()) / width;
  const QuantParams p{.bits = 8, .group_size = width};
  const std::vector<std::uint8_t> packed = quantize_int_rtn(x, n, width, p);
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(width));
  std::vector<float> out(x.size());
  for (std::int64_t r = 0; r < n; ++r) {
    dequantize_int_row(p, packed.data() + static_cast<std::size_t>(r) * rb,
                       std::span<float>(out).subspan(static_cast<std::size_t>(r * width), static_cast<std::size_t>(width)));
  }
  return out;
}

// Σ over the matrices of ||x_err · Wᵀ||² (the product error of an activation error x_err).
double product_error(std::span<const float> x_err, std::int64_t width, const FloatModel& m, std::int64_t layer) {
  double sum = 0.0;
  for (const char* name : linear_names(LinearInput::kAttention)) {
    const auto w = m.tensor(layer_tensor_name(layer, name));
    for (std::size_t r = 0; r < w.size() / static_cast<std::size_t>(width); ++r) {
      for (std::size_t t = 0; t < x_err.size() / static_cast<std::size_t>(width); ++t) {
        double dot = 0.0;
        for (std::int64_t j = 0; j < width; ++j) dot += static_cast<double>(x_err[t * width + j]) * w[r * width + j];
        sum += dot * dot;
      }
    }
  }
  return sum;
}

// The attention input of every layer of stories260K, quantized to per-token int8 plain
// (Q(X) − X) and smoothed (Q(X/s)·diag(s) − X: what (diag(s)W) sees after Q(X/s)).
TEST(SmoothQuant, SmoothingLowersStoriesAttentionInputInt8Error) {
  ThreadPool pool(2);
  const FloatModel m = test::load_float_model(test::stories260k_bin());
  const auto acts = test::record_activations(m, test::story_tokens(m), pool);
  double plain_total = 0.0, smooth_total = 0.0;
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    const test::Activations& a = acts.at({l, LinearInput::kAttention});
    const auto width = static_cast<std::size_t>(a.width);
    std::vector<float> act_max(width, 0.0f);
    for (std::size_t i = 0; i < a.x.size(); ++i) act_max[i % width] = std::max(act_max[i % width], std::fabs(a.x[i]));
    std::vector<std::span<const float>> ws;
    std::vector<std::int64_t> rows;
    for (const char* name : linear_names(LinearInput::kAttention)) {
      ws.push_back(m.tensor(layer_tensor_name(l, name)));
      rows.push_back(m.shape(layer_tensor_name(l, name))[0]);
    }
    auto s = smoothquant_scales(act_max, ws, rows, a.width, 0.5f);
    ASSERT_TRUE(s) << s.status().message();

    std::vector<float> plain_err = per_token_int8(a.x, a.width), smoothed(a.x.size());
    for (std::size_t i = 0; i < a.x.size(); ++i) smoothed[i] = a.x[i] / (*s)[i % width];
    std::vector<float> smooth_err = per_token_int8(smoothed, a.width);
    for (std::size_t i = 0; i < a.x.size(); ++i) {
      plain_err[i] -= a.x[i];
      smooth_err[i] = smooth_err[i] * (*s)[i % width] - a.x[i];
    }
    const double plain = product_error(plain_err, a.width, m, l), smooth = product_error(smooth_err, a.width, m, l);
    std::printf("[ smoothquant ] layer %lld: q/k/v int8 activation error %.4e → %.4e (ratio %.3f)\n",
                static_cast<long long>(l), plain, smooth, smooth / plain);
    EXPECT_LT(smooth, plain) << "layer " << l;
    plain_total += plain;
    smooth_total += smooth;
  }
  std::printf("[ smoothquant ] all layers: ratio %.3f\n", smooth_total / plain_total);
}

}  // namespace
}  // namespace peregrine

// SparseGPT: the identity-Hessian case (plain per-row magnitude pruning), lazy batching as an
// exact regrouping of the column-by-column sweep, the joint quantized result decoding to the
// returned weights, and — on the real stories260K activations — a smaller reconstruction error
// ||W X − Ŵ X||² than Wanda's and magnitude's masks at the same target (calibration text:
// tinystories_sample.txt).
#include "peregrine/prune/sparsegpt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "peregrine/prune/importance.h"
#include "peregrine/quant/calibration.h"
#include "peregrine/quant/int_group.h"
#include "real_model_eval.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::vector<float> random_weights(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(n));
  for (float& v : w) v = g(rng);
  return w;
}

// (2/n) Σ x xᵀ of n random correlated inputs of `cols` features.
std::vector<double> random_hessian(std::int64_t cols, std::int64_t n, std::uint32_t seed) {
  const auto x = random_weights(n * cols, seed);
  std::vector<double> h(static_cast<std::size_t>(cols * cols));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t i = 0; i < cols; ++i) {
      const double xi = x[static_cast<std::size_t>(t * cols + i)] + 0.5 * x[static_cast<std::size_t>(t * cols + (i + 1) % cols)];
      for (std::int64_t j = 0; j < cols; ++j) {
        const double xj = x[static_cast<std::size_t>(t * cols + j)] + 0.5 * x[static_cast<std::size_t>(t * cols + (j + 1) % cols)];
        h[static_cast<std::size_t>(i * cols + j)] += 2.0 * xi * xj / static_cast<double>(n);
      }
    }
  }
  return h;
}

TEST(SparseGpt, IdentityHessianIsPerRowMagnitudePruning) {
  const std::int64_t rows = 9, cols = 40;
  const auto w = random_weights(rows * cols, 3);
  std::vector<double> h(static_cast<std::size_t>(cols * cols));
  for (std::int64_t j = 0; j < cols; ++j) h[static_cast<std::size_t>(j * cols + j)] = 1.0;
  for (const SparsityTarget t : {SparsityTarget{0.5}, SparsityTarget{0.0, 2, 4}}) {
    auto r = sparsegpt_prune(w, rows, cols, h, {t, 0.01, 128, std::nullopt});
    ASSERT_TRUE(r.has_value()) << r.status().message();
    std::vector<float> expected(w);
    apply_mask(expected, select_mask(magnitude_scores(w), rows, cols, t, MaskScope::kPerRow));
    EXPECT_EQ(r->weights, expected) << t.describe();  // no off-diagonal terms: nothing to update
  }
}

TEST(SparseGpt, LazyBlocksRegroupTheColumnSweepExactly) {
  const std::int64_t rows = 37, cols = 96;
  const auto w = random_weights(rows * cols, 4);
  const auto h = random_hessian(cols, 300, 5);
  const SparsityTarget t{0.0, 2, 4};  // masks per 4-column group: independent of the block size
  ThreadPool pool(3);
  auto one = sparsegpt_prune(w, rows, cols, h, {t, 0.01, 4, std::nullopt});
  auto lazy = sparsegpt_prune(w, rows, cols, h, {t, 0.01, 32, std::nullopt}, &pool);
  ASSERT_TRUE(one.has_value() && lazy.has_value());
  EXPECT_EQ(one->keep, lazy->keep);
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(one->weights[i], lazy->weights[i], 1e-4) << i;
  EXPECT_NEAR(one->loss, lazy->loss, 1e-6 * one->loss);
  EXPECT_TRUE(follows_pattern(lazy->weights, rows, cols, t));
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (lazy->keep[i] == 0) {
      ASSERT_EQ(lazy->weights[i], 0.0f);
    }
  }
}

TEST(SparseGpt, JointQuantizationDecodesToTheReturnedWeights) {
  const std::int64_t rows = 20, cols = 132;  // a partial last group and a 2:4 tail-free width
  const auto w = random_weights(rows * cols, 6);
  const auto h = random_hessian(cols, 400, 7);
  for (const SparsityTarget t : {SparsityTarget{0.5}, SparsityTarget{0.0, 2, 4}}) {
    const QuantParams p{4, t.nm() ? 64 : 32, false, 16, 0.0f};
    auto r = sparsegpt_prune(w, rows, cols, h, {t, 0.01, 128, p});
    ASSERT_TRUE(r.has_value()) << r.status().message();
    const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(cols));
    ASSERT_EQ(r->packed.size(), rb * static_cast<std::size_t>(rows));
    std::vector<float> decoded(static_cast<std::size_t>(cols));
    for (std::int64_t row = 0; row < rows; ++row) {
      dequantize_int_row(p, r->packed.data() + rb * static_cast<std::size_t>(row), decoded);
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(row * cols + c);
        ASSERT_EQ(decoded[static_cast<std::size_t>(c)], r->weights[i]) << t.describe() << " " << i;
        if (r->keep[i] == 0) {
          ASSERT_EQ(r->weights[i], 0.0f);
        }
      }
    }
    EXPECT_TRUE(follows_pattern(r->weights, rows, cols, t));
  }
}

TEST(SparseGpt, RejectsBadInput) {
  const std::vector<float> w(8, 1.0f);
  const std::vector<double> h(16, 0.0);
  EXPECT_FALSE(sparsegpt_prune(w, 2, 4, h, {{1.0}, 0.01, 128, std::nullopt}).has_value());
  EXPECT_FALSE(sparsegpt_prune(w, 2, 4, std::vector<double>(15), {{0.5}, 0.01, 128, std::nullopt}).has_value());
  std::vector<float> nan = w;
  nan[3] = std::nanf("");
  EXPECT_FALSE(sparsegpt_prune(nan, 2, 4, h, {{0.5}, 0.01, 128, std::nullopt}).has_value());
  const QuantParams odd{4, 6, false, 16, 0.0f};
  auto e = sparsegpt_prune(std::vector<float>(24, 1.0f), 2, 12, std::vector<double>(144), {{0.0, 2, 4}, 0.01, 128, odd});
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("not a multiple of M"), std::string::npos) << e.status().message();
}

// ||W X − Ŵ X||² over calibration inputs x, = Σ (w − ŵ)ᵀ H (w − ŵ) · n / 2 per row.
double reconstruction_error(std::span<const float> w, std::span<const float> pruned, std::int64_t cols,
                            std::span<const double> h) {
  double total = 0.0;
  for (std::size_t r = 0; r * static_cast<std::size_t>(cols) < w.size(); ++r) {
    for (std::int64_t i = 0; i < cols; ++i) {
      const double di = w[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(i)] -
                        pruned[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < cols; ++j) {
        const double dj = w[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j)] -
                          pruned[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j)];
        total += di * h[static_cast<std::size_t>(i * cols + j)] * dj;
      }
    }
  }
  return total;
}

TEST(SparseGpt, ReconstructsRealActivationsBetterThanWandaAndMagnitude) {
  auto model = test::load_stories260k();
  ASSERT_NE(model, nullptr);
  auto tok = load_tokenizer(model->file());
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  auto chunks = calibration_chunks(**tok, test::calibration_text_path(), 1024, 256);
  ASSERT_TRUE(chunks.has_value()) << chunks.status().message();
  ThreadPool pool(2);
  auto stats = calibrate(*model, 2, 2, *chunks, {true, 0}, pool);
  ASSERT_TRUE(stats.has_value()) << stats.status().message();
  for (LinearInput in : {LinearInput::kAttention, LinearInput::kFfnDown}) {
    const InputStats& s = (*stats)[0][static_cast<std::size_t>(in)];
    const std::string name = layer_tensor_name(2, linear_names(in)[0]);
    const TensorView& t = model->file().tensors.at(name);
    const std::int64_t rows = t.shape[0], cols = t.shape[1];
    const std::span<const float> w(static_cast<const float*>(t.data), static_cast<std::size_t>(rows * cols));
    const auto h = s.hessian();
    for (const SparsityTarget target : {SparsityTarget{0.5}, SparsityTarget{0.0, 2, 4}}) {
      auto sgpt = sparsegpt_prune(w, rows, cols, h, {target, 0.01, 128, std::nullopt});
      ASSERT_TRUE(sgpt.has_value()) << sgpt.status().message();
      std::vector<float> wanda(w.begin(), w.end()), magnitude(w.begin(), w.end());
      apply_mask(wanda, select_mask(wanda_scores(w, s.l2_norm()), rows, cols, target, MaskScope::kPerRow));
      apply_mask(magnitude, select_mask(magnitude_scores(w), rows, cols, target, MaskScope::kPerRow));
      const double e_sgpt = reconstruction_error(w, sgpt->weights, cols, h), e_wanda = reconstruction_error(w, wanda, cols, h),
                   e_mag = reconstruction_error(w, magnitude, cols, h);
      std::printf("%s %s: ||WX - W'X||^2 sparsegpt %.4f wanda %.4f magnitude %.4f\n", name.c_str(), target.describe().c_str(),
                  e_sgpt, e_wanda, e_mag);
      EXPECT_LT(e_sgpt, e_wanda);
      EXPECT_LT(e_sgpt, e_mag);
    }
  }
}

}  // namespace
}  // namespace peregrine

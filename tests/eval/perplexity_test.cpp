// Windowed perplexity and model comparison on the real stories260K model and TinyStories text:
// the windows' bookkeeping against teacher-forced logits of each window's tokens, agreement
// between perplexity() and compare_logits(), and bad inputs.
#include "peregrine/eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "peregrine/eval/logit_comparison.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/model_shapes.h"
#include "peregrine/model/synth_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_TRUE(model_);
    auto file = load_model_file(test::stories260k_path());
    ASSERT_TRUE(file) << file.status().message();
    auto tok = load_tokenizer(*file, "");
    ASSERT_TRUE(tok) << tok.status().message();
    // Several stories of the TinyStories validation split, one per line, as one text.
    const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
    tokens_ = (*tok)->encode(text, true);
    ASSERT_GT(tokens_.size(), 2000u);
    tokens_.resize(500);  // within the 512-token context
  }

  // exp(mean NLL) over the windows' targets, each window's logits from teacher_forced_logits on
  // its own tokens (every row, f32 K/V): an independent path through the model API.
  double brute_force_ppl(std::int64_t ctx, std::int64_t stride) {
    auto windows = plan_windows(static_cast<std::int64_t>(tokens_.size()), ctx, stride);
    EXPECT_TRUE(windows);
    const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
    double nll = 0.0;
    std::int64_t n = 0;
    for (const EvalWindow& w : *windows) {
      const std::span<const std::int32_t> span(tokens_.data() + w.begin, static_cast<std::size_t>(w.end - w.begin));
      auto logits = teacher_forced_logits(*model_, span, pool_);
      EXPECT_TRUE(logits) << logits.status().message();
      for (std::int64_t t = w.first_target; t < w.end; ++t, ++n) {
        const std::span<const float> row(logits->data() + static_cast<std::size_t>(t - 1 - w.begin) * vocab, vocab);
        nll -= log_softmax_at(row, tokens_[static_cast<std::size_t>(t)]);
      }
    }
    EXPECT_EQ(n, static_cast<std::int64_t>(tokens_.size()) - 1);
    return std::exp(nll / static_cast<double>(n));
  }

  std::unique_ptr<LlamaModel> model_;
  ThreadPool pool_{2};
  std::vector<std::int32_t> tokens_;
};

TEST_F(PerplexityTest, MatchesTeacherForcedLogitsOfEachWindow) {
  // One window of the whole text, overlapping windows, and stride 1 (a window per token).
  const std::int64_t cases[][2] = {{500, 500}, {128, 48}, {100, 99}, {40, 1}};
  for (const auto& [ctx, stride] : cases) {
    auto r = perplexity(*model_, tokens_, {ctx, stride, DType::kF32}, pool_);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(r->n_scored, static_cast<std::int64_t>(tokens_.size()) - 1);
    EXPECT_EQ(r->n_windows, static_cast<std::int64_t>(plan_windows(500, ctx, stride)->size()));
    EXPECT_NEAR(r->ppl, brute_force_ppl(ctx, stride), 1e-6 * r->ppl) << "ctx " << ctx << " stride " << stride;
    EXPECT_NEAR(r->ppl, std::exp(r->nll), 1e-12 * r->ppl);
    std::printf("[ ppl ] ctx %3lld stride %3lld: %lld windows, ppl %.4f\n", static_cast<long long>(ctx),
                static_cast<long long>(stride), static_cast<long long>(r->n_windows), r->ppl);
  }
}

TEST_F(PerplexityTest, MoreContextPerScoredTokenLowersPerplexity) {
  // A language model predicts better with more context: windows of 256 scoring 64 new tokens
  // each beat disjoint windows of 64 (measured 5.02 vs 5.71 on these 500 tokens).
  auto overlapping = perplexity(*model_, tokens_, {256, 64, DType::kF32}, pool_);
  auto disjoint = perplexity(*model_, tokens_, {64, 64, DType::kF32}, pool_);
  ASSERT_TRUE(overlapping && disjoint);
  std::printf("[ ppl ] overlapping %.4f disjoint %.4f\n", overlapping->ppl, disjoint->ppl);
  EXPECT_LT(overlapping->ppl, disjoint->ppl);
  // Far below the 512 of a uniform guess on the text the model was trained on.
  EXPECT_GT(overlapping->ppl, 3.0);
  EXPECT_LT(overlapping->ppl, 15.0);
}

TEST_F(PerplexityTest, ReportsProgressAfterEveryWindow) {
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;
  auto r = perplexity(*model_, tokens_, {256, 128, DType::kF32}, pool_,
                      [&](std::int64_t done, std::int64_t total) { calls.emplace_back(done, total); });
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(calls.size(), 3u);  // [0,256) [128,384) [256,500)
  for (std::size_t k = 0; k < calls.size(); ++k) EXPECT_EQ(calls[k], std::make_pair(static_cast<std::int64_t>(k) + 1, std::int64_t{3}));
}

TEST_F(PerplexityTest, WindowedComparisonAgreesWithPerplexity) {
  // The model against itself: same windows, so KL 0, top-1 1 and both perplexities equal
  // perplexity()'s. With i8 K/V on the compared side the statistics measure the KV cache.
  const EvalWindowOptions o{256, 100, DType::kF32};
  auto ppl = perplexity(*model_, tokens_, o, pool_);
  auto same = compare_logits(*model_, *model_, tokens_, o, pool_);
  ASSERT_TRUE(ppl && same);
  EXPECT_EQ(same->n_positions, ppl->n_scored);
  EXPECT_EQ(same->n_windows, ppl->n_windows);
  EXPECT_EQ(same->mean_kl, 0.0);
  EXPECT_EQ(same->max_kl, 0.0);
  EXPECT_EQ(same->top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(same->reference_ppl, ppl->ppl);
  EXPECT_DOUBLE_EQ(same->candidate_ppl, ppl->ppl);

  auto i8 = compare_logits(*model_, *model_, tokens_, {256, 100, DType::kI8}, pool_);
  auto i8_ppl = perplexity(*model_, tokens_, {256, 100, DType::kI8}, pool_);
  ASSERT_TRUE(i8 && i8_ppl);
  EXPECT_GT(i8->mean_kl, 0.0);
  EXPECT_LT(i8->mean_kl, 0.05);
  EXPECT_GT(i8->top1_agreement, 0.9);
  EXPECT_DOUBLE_EQ(i8->reference_ppl, ppl->ppl);
  EXPECT_DOUBLE_EQ(i8->candidate_ppl, i8_ppl->ppl);
}

TEST_F(PerplexityTest, RejectsBadInput) {
  auto code = [&](std::span<const std::int32_t> tokens, EvalWindowOptions o) {
    return perplexity(*model_, tokens, o, pool_).status().code();
  };
  EXPECT_EQ(code(tokens_, {513, 256, DType::kF32}), ErrorCode::kInvalidArgument);  // past the 512-token context
  EXPECT_EQ(code(tokens_, {1, 1, DType::kF32}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(tokens_, {64, 65, DType::kF32}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(std::vector<std::int32_t>{1}, {64, 32, DType::kF32}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(std::vector<std::int32_t>{1, 600, 2}, {64, 32, DType::kF32}), ErrorCode::kOutOfRange);  // id past the vocab
  EXPECT_EQ(code(tokens_, {64, 32, DType::kBF16}), ErrorCode::kInvalidArgument);  // not a KV type
}

TEST_F(PerplexityTest, ComparisonRejectsAnotherVocabulary) {
  // A random-weight model of stories260K's shape with 1024 tokens instead of 512.
  ModelShape shape = *find_model_shape("stories260k");
  shape.config.vocab_size = 1024;
  const std::string path = test::make_temp_dir() + "/vocab1024.gguf";
  ASSERT_TRUE(synth_gguf(shape, {}, path, pool_));
  auto file = load_model_file(path);
  ASSERT_TRUE(file) << file.status().message();
  auto other = LlamaModel::create(std::move(*file));
  ASSERT_TRUE(other) << other.status().message();
  auto c = compare_logits(*model_, *other, tokens_, {128, 64, DType::kF32}, pool_);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("vocabularies differ: the reference has 512 tokens, the compared model 1024"),
            std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace peregrine

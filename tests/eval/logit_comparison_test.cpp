// KL divergence, log-softmax and model-vs-model comparison on the real stories260K model.
#include "peregrine/eval/logit_comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "peregrine/formats/model_file.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

TEST(KlDivergence, ZeroForIdenticalAndShiftedLogits) {
  const std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f};
  std::vector<float> shifted = p;
  for (float& x : shifted) x += 7.0f;  // softmax is shift-invariant
  EXPECT_NEAR(kl_divergence(p, p), 0.0, 1e-12);
  EXPECT_NEAR(kl_divergence(p, shifted), 0.0, 1e-12);
}

TEST(KlDivergence, MatchesTheClosedFormForTwoOutcomes) {
  // softmax([0, ln 3]) = (1/4, 3/4); softmax([0, 0]) = (1/2, 1/2).
  const std::vector<float> p = {0.0f, std::log(3.0f)}, q = {0.0f, 0.0f};
  const double expected = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);
  EXPECT_NEAR(kl_divergence(p, q), expected, 1e-7);
  EXPECT_NEAR(log_softmax_at(p, 1), std::log(0.75), 1e-7);
}

class CompareLogitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = load_model_file(model_path());
    ASSERT_TRUE(file) << file.status().message();
    auto tok = load_tokenizer(*file, "");
    ASSERT_TRUE(tok) << tok.status().message();
    // The opening of a real TinyStories story (the data stories260K was trained on).
    const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
    tokens_ = (*tok)->encode(text.substr(0, 400), true);
    ASSERT_GT(tokens_.size(), 50u);
  }
  static std::string model_path() { return test::stories260k_path(); }
  static std::unique_ptr<LlamaModel> load() { return test::load_stories260k(); }
  ThreadPool pool_{2};
  std::vector<std::int32_t> tokens_;
};

TEST_F(CompareLogitsTest, AModelAgreesWithItself) {
  auto a = load(), b = load();
  auto c = compare_logits(*a, *b, tokens_, pool_);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->n_positions, static_cast<std::int64_t>(tokens_.size()) - 1);
  EXPECT_NEAR(c->mean_kl, 0.0, 1e-12);
  EXPECT_NEAR(c->max_kl, 0.0, 1e-12);
  EXPECT_EQ(c->top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(c->reference_ppl, c->candidate_ppl);
  // stories260K on TinyStories text: far better than the uniform 512 of a random model.
  EXPECT_GT(c->reference_ppl, 1.0);
  EXPECT_LT(c->reference_ppl, 50.0);
}

TEST_F(CompareLogitsTest, RejectsTooFewOrTooManyTokens) {
  auto a = load();
  EXPECT_EQ(compare_logits(*a, *a, std::vector<std::int32_t>{1}, pool_).status().code(), ErrorCode::kInvalidArgument);
  const std::vector<std::int32_t> too_long(static_cast<std::size_t>(a->config().max_seq_len + 1), 1);
  EXPECT_EQ(teacher_forced_logits(*a, too_long, pool_).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine

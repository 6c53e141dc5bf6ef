// ModelDrafter's EAGLE mode on stories260K with a head that passes the feature through
// (test::identity_eagle_head): the root's row reads its parent's feature (the head drafts what
// the target's LM head said there, i.e. the greedy root itself), features handed over in later
// calls extend the head's cache, positions without a feature still draft, blocks come back, and
// bad requests / options are errors. The head's numerics against its training module:
// tests/train/eagle_runtime_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "peregrine/spec/model_drafter.h"
#include "spec/medusa_fixture.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::int32_t argmax_row(const std::vector<float>& logits, std::int64_t row, std::int64_t vocab) {
  const auto b = logits.begin() + row * vocab;
  return static_cast<std::int32_t>(std::max_element(b, b + vocab) - b);
}

class EagleDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = test::load_stories260k();
    ASSERT_TRUE(target_);
    auto layer = EagleLayer::create(test::identity_eagle_head(*target_), *target_);
    ASSERT_TRUE(layer) << layer.status().message();
    layer_ = std::move(*layer);
    ModelDrafterOptions o;
    o.method = SpecMethod::kEagle;
    o.kv_blocks = 64;
    auto d = ModelDrafter::create_eagle(*layer_, target_->config(), o);
    ASSERT_TRUE(d) << d.status().message();
    drafter_ = std::move(*d);
    greedy_.temperature = 0.0f;
    // The greedy continuation of a prompt and the target's features along it.
    tokens_ = {1, 403, 407, 261, 378, 275, 262, 291};
    for (int i = 0; i < 6; ++i) {
      const test::Features f = test::target_features(*target_, tokens_, pool_);
      tokens_.push_back(argmax_row(f.logits, static_cast<std::int64_t>(tokens_.size()) - 1, target_->config().vocab_size));
    }
    features_ = test::target_features(*target_, tokens_, pool_).features;
  }

  /// A chain of k nodes for tokens_[0, n) given the features of positions [from, n - 1).
  DraftTree draft(std::size_t n, std::int64_t from, std::int32_t k) {
    const std::int64_t d = target_->config().dim;
    const auto f = std::span<const float>(features_).subspan(static_cast<std::size_t>(from * d),
                                                            static_cast<std::size_t>((static_cast<std::int64_t>(n) - 1 - from) * d));
    const DraftRequest r{4, std::span(tokens_).first(n), k, 1, &greedy_, nullptr, f, from};
    std::vector<DraftTree> trees;
    EXPECT_TRUE(drafter_->draft(std::span(&r, 1), trees, pool_).is_ok());
    return trees.at(0);
  }

  ThreadPool pool_{1};
  std::unique_ptr<LlamaModel> target_;
  std::unique_ptr<EagleLayer> layer_;
  std::unique_ptr<ModelDrafter> drafter_;
  SamplingParams greedy_;
  std::vector<std::int32_t> tokens_;
  std::vector<float> features_;
};

TEST_F(EagleDrafterTest, RootRowReadsItsParentsFeatureAndLaterCallsExtendTheCache) {
  EXPECT_TRUE(drafter_->needs_features());
  // tokens_[0, 9): root tokens_[8], the greedy token after position 7: the head drafts it again.
  DraftTree t = draft(9, 0, 3);
  ASSERT_EQ(t.size(), 3);
  for (const DraftNode& n : t.nodes) EXPECT_EQ(n.token, tokens_[8]);
  // Two tokens accepted: only positions 8 and 9 are new.
  t = draft(11, 8, 2);
  ASSERT_EQ(t.size(), 2);
  EXPECT_EQ(t.nodes[0].token, tokens_[10]);
  EXPECT_EQ(drafter_->kv_cache().length(0), 10);  // rows of positions 0 .. 9 (tokens 1 .. 10)
}

TEST_F(EagleDrafterTest, PositionsWithoutFeaturesStillDraftAndBlocksComeBack) {
  const std::int64_t free = drafter_->kv_cache().pool().n_free();
  // No feature at all (e.g. a prompt taken from the prefix cache): zeros, but a draft.
  const DraftRequest bare{4, std::span(tokens_).first(9), 3, 2, &greedy_, nullptr, {}, 0};
  std::vector<DraftTree> trees;
  ASSERT_TRUE(drafter_->draft(std::span(&bare, 1), trees, pool_).is_ok());
  EXPECT_EQ(trees[0].size(), 3);
  // Only the root: nothing to draft from.
  const DraftRequest root_only{5, std::span(tokens_).first(1), 3, 1, &greedy_, nullptr, {}, 0};
  ASSERT_TRUE(drafter_->draft(std::span(&root_only, 1), trees, pool_).is_ok());
  EXPECT_TRUE(trees[0].empty());
  drafter_->release(4);
  drafter_->release(5);
  EXPECT_EQ(drafter_->kv_cache().pool().n_free(), free);
}

TEST_F(EagleDrafterTest, BadRequestsAndOptionsAreErrors) {
  const std::vector<float> ragged(static_cast<std::size_t>(target_->config().dim) + 1, 0.0f);
  const DraftRequest r{4, std::span(tokens_).first(9), 3, 1, &greedy_, nullptr, ragged, 0};
  std::vector<DraftTree> trees;
  EXPECT_EQ(drafter_->draft(std::span(&r, 1), trees, pool_).code(), ErrorCode::kInvalidArgument);
  ModelDrafterOptions o;
  o.kv_blocks = 8;
  o.method = SpecMethod::kDraft;
  EXPECT_FALSE(ModelDrafter::create_eagle(*layer_, target_->config(), o));
  o.method = SpecMethod::kEagle;
  o.n_layers = 1;
  EXPECT_FALSE(ModelDrafter::create_eagle(*layer_, target_->config(), o));
  EagleHead other = test::identity_eagle_head(*target_);
  other.vocab += 1;
  EXPECT_EQ(EagleLayer::create(std::move(other), *target_).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine

// The scheduler's token budgets over a KV cache shaped like the real stories260K model:
// stall-free batching caps the prompt tokens of a step that decodes (Sarathi-Serve), and only
// such a step.
#include "peregrine/engine/scheduler.h"

#include <gtest/gtest.h>

#include "test_models.h"

namespace peregrine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_NE(model_, nullptr);
    auto cache = KvCache::create(model_->config().kv_shape(), {64, 16, DType::kF32});
    ASSERT_TRUE(cache) << cache.status().message();
    cache_ = std::make_unique<KvCache>(std::move(*cache));
  }

  Sequence* add(Scheduler& s, std::int32_t kv_seq, std::size_t prompt_len) {
    RequestOptions r;
    r.prompt.assign(prompt_len, 1);
    r.max_tokens = 8;
    auto seq = std::make_unique<Sequence>(kv_seq, kv_seq, std::move(r), RequestCallbacks{});
    Sequence* p = seq.get();
    s.enqueue(std::move(seq));
    return p;
  }

  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
};

std::int64_t tokens_of(const std::vector<ScheduledChunk>& chunks, const Sequence* seq) {
  for (const auto& c : chunks) {
    if (c.seq == seq) return c.n_tokens;
  }
  return 0;
}

TEST_F(SchedulerTest, PrefillBudgetCapsPromptTokensOnlyBesideDecodes) {
  Scheduler s({/*max_batch_tokens=*/64, /*max_running=*/8, /*prefill_budget=*/6}, *cache_, nullptr);
  Sequence* a = add(s, 0, 40);
  auto step = s.schedule();  // nothing decodes yet: the whole prompt, up to max_batch_tokens
  EXPECT_EQ(tokens_of(step, a), 40);
  s.commit(step);
  a->tokens.push_back(2);  // a's first sampled token: a decodes from now on

  Sequence* b = add(s, 1, 20);
  Sequence* c = add(s, 2, 20);
  step = s.schedule();  // a decodes, so b and c share 6 prompt tokens
  EXPECT_EQ(tokens_of(step, a), 1);
  EXPECT_EQ(tokens_of(step, b), 6);
  EXPECT_EQ(tokens_of(step, c), 0);
  s.commit(step);
  a->tokens.push_back(3);

  step = s.schedule();
  EXPECT_EQ(tokens_of(step, a), 1);
  EXPECT_EQ(tokens_of(step, b) + tokens_of(step, c), 6);
  s.commit(step);

  // a finished: no decode left, so the prompts take the whole step budget again.
  s.remove(a);
  step = s.schedule();
  EXPECT_EQ(tokens_of(step, b) + tokens_of(step, c), 40 - 12);
}

TEST_F(SchedulerTest, StepBudgetFillsStepsWithFewDecodesAndKeepsThePrefillBudgetWithMany) {
  Scheduler s({/*max_batch_tokens=*/64, /*max_running=*/8, /*prefill_budget=*/4, /*step_budget=*/10}, *cache_, nullptr);
  std::vector<Sequence*> decoding;
  for (std::int32_t i = 0; i < 6; ++i) decoding.push_back(add(s, i, 3));
  s.commit(s.schedule());  // the six prompts at once (no decode yet)
  for (Sequence* d : decoding) d->tokens.push_back(2);
  Sequence* p = add(s, 6, 50);

  const auto step_with = [&](std::size_t n_decoding) {
    while (decoding.size() > n_decoding) {
      s.remove(decoding.back());
      decoding.pop_back();
    }
    auto step = s.schedule();
    for (Sequence* d : decoding) EXPECT_EQ(tokens_of(step, d), 1);
    const std::int64_t prompt = tokens_of(step, p);
    s.commit(step);
    for (Sequence* d : decoding) d->tokens.push_back(3);
    return prompt;
  };
  EXPECT_EQ(step_with(6), 4);   // 10 - 6 = 4: the prefill budget either way
  EXPECT_EQ(step_with(5), 5);   // 10 - 5
  EXPECT_EQ(step_with(2), 8);   // 10 - 2
  EXPECT_EQ(step_with(1), 9);
}

TEST_F(SchedulerTest, StepBudgetBelowTheDecodesStillCarriesThePrefillBudget) {
  Scheduler s({/*max_batch_tokens=*/64, /*max_running=*/8, /*prefill_budget=*/3, /*step_budget=*/2}, *cache_, nullptr);
  Sequence* a = add(s, 0, 5);
  Sequence* b = add(s, 1, 5);
  s.commit(s.schedule());
  a->tokens.push_back(2);
  b->tokens.push_back(2);
  Sequence* p = add(s, 2, 30);
  const auto step = s.schedule();
  EXPECT_EQ(tokens_of(step, a) + tokens_of(step, b), 2);
  EXPECT_EQ(tokens_of(step, p), 3);
}

TEST_F(SchedulerTest, ZeroPrefillBudgetLeavesTheStepBudget) {
  Scheduler s({/*max_batch_tokens=*/32, /*max_running=*/8, /*prefill_budget=*/0}, *cache_, nullptr);
  Sequence* a = add(s, 0, 10);
  s.commit(s.schedule());
  a->tokens.push_back(2);
  Sequence* b = add(s, 1, 50);
  const auto step = s.schedule();
  EXPECT_EQ(tokens_of(step, a), 1);
  EXPECT_EQ(tokens_of(step, b), 31);
}

}  // namespace
}  // namespace peregrine

// One owner of KV bookkeeping: plan_batch_kv reserves a batch's slots, truncates a tail its rows
// rewrite and sets the lengths; the forward of a planned batch leaves every block table and
// length as the plan made them and gives the logits of an unplanned forward; a batch claiming a
// plan the cache lacks is refused; a gap is refused before anything changes.
#include "peregrine/model/batch_kv_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "peregrine/model/llama_model.h"
#include "test_models.h"

namespace peregrine {
namespace {

std::vector<std::int32_t> table(const KvCache& cache, std::int32_t seq) {
  const auto t = cache.block_table(seq);
  return {t.begin(), t.end()};
}

Batch prompt_batch(std::int32_t seq, std::int32_t first, std::int32_t n) {
  Batch b;
  for (std::int32_t p = first; p < first + n; ++p) b.add(1 + (p * 37) % 400, p, seq, p + 1 == first + n);
  return b;
}

TEST(BatchKvPlan, APlannedForwardOnlyWritesRowsAndMatchesAnUnplannedOne) {
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(2);
  KvCache planned = test::make_kv_cache(model->config(), 64, 2, 16), unplanned = test::make_kv_cache(model->config(), 64, 2, 16);
  Batch a = prompt_batch(0, 0, 20), b = a;
  ASSERT_TRUE(plan_batch_kv(a, planned).is_ok());
  EXPECT_TRUE(a.kv_planned);
  EXPECT_EQ(planned.length(0), 20);
  const std::vector<std::int32_t> before = table(planned, 0);
  const std::int32_t free_before = planned.pool().n_free();
  std::vector<float> la, lb;
  ASSERT_TRUE(model->forward(a, planned, la, pool).is_ok());
  EXPECT_EQ(table(planned, 0), before);
  EXPECT_EQ(planned.pool().n_free(), free_before);
  EXPECT_EQ(planned.length(0), 20);
  ASSERT_TRUE(model->forward(b, unplanned, lb, pool).is_ok());  // plans itself
  EXPECT_EQ(unplanned.length(0), 20);
  EXPECT_EQ(la, lb);

  // A rewritten tail: the plan truncates to the batch's first slot, then reserves.
  Batch tail = prompt_batch(0, 18, 5);
  ASSERT_TRUE(plan_batch_kv(tail, planned).is_ok());
  EXPECT_EQ(planned.length(0), 23);
}

TEST(BatchKvPlan, AClaimedPlanTheCacheLacksAndAGapAreRefused) {
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(2);
  KvCache cache = test::make_kv_cache(model->config(), 64, 1, 16);
  Batch claimed = prompt_batch(0, 0, 20);
  claimed.kv_planned = true;  // nobody reserved its slots
  std::vector<float> logits;
  EXPECT_EQ(model->forward(claimed, cache, logits, pool).code(), ErrorCode::kInternal);
  EXPECT_FALSE(cache.has_sequence(0));

  Batch gap = prompt_batch(0, 5, 3);  // sequence 0 holds no positions yet
  EXPECT_EQ(plan_batch_kv(gap, cache).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(gap.kv_planned);
  EXPECT_EQ(cache.pool().n_free(), cache.pool().n_blocks());

  Batch ok = prompt_batch(0, 0, 4);
  ASSERT_TRUE(plan_batch_kv(ok, cache).is_ok());
  ok.add(7, 4, 0, true);  // a row added after planning needs a new plan
  EXPECT_FALSE(ok.kv_planned);
}

}  // namespace
}  // namespace peregrine

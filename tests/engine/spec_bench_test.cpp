// run_spec_bench (engine/spec_bench.h) on stories260K with prompt lookup: greedy runs emit the
// same tokens as plain decoding and count τ >= 1; sampled runs (temperature 1, seeded per prompt)
// fill the same statistics; bad arguments give one clear error.
#include "peregrine/engine/spec_bench.h"

#include <gtest/gtest.h>

#include "test_models.h"

namespace peregrine {
namespace {

std::vector<SpecBenchTask> repeat_task() {
  // "Once upon a time" in stories260K ids, twice: prompt lookup finds the repeat.
  const std::vector<std::int32_t> prompt = {1, 403, 407, 261, 500, 12, 99, 311, 275, 430, 403, 407, 261};
  return {{"repeat", {prompt, prompt}}};
}

std::vector<SpecBenchMethod> pld() {
  SpecParams p;
  p.method = SpecMethod::kPld;
  p.draft_max = 4;
  return {{"pld", p, nullptr}};
}

TEST(SpecBench, GreedyRunsMatchPlainDecodingAndSampledRunsCount) {
  auto model = test::load_stories260k();
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  for (float temperature : {0.0f, 1.0f}) {
    auto rows = run_spec_bench(*model, repeat_task(), pld(), 48, 1, pool, temperature);
    ASSERT_TRUE(rows) << rows.status().message();
    ASSERT_EQ(rows->size(), 2u);
    const SpecBenchRow& plain = (*rows)[0];
    const SpecBenchRow& spec = (*rows)[1];
    EXPECT_EQ(plain.method, "none");
    EXPECT_EQ(spec.runs, 2);
    EXPECT_EQ(spec.generated, 2 * 48);
    EXPECT_DOUBLE_EQ(plain.mean_accepted(), 1.0);
    EXPECT_GE(spec.mean_accepted(), 1.0);
    EXPECT_GE(spec.acceptance_rate(), 0.0);
    EXPECT_LE(spec.acceptance_rate(), 1.0);
    EXPECT_LE(spec.accepted, spec.drafted);
    if (temperature == 0.0f) {
      EXPECT_TRUE(spec.identical);
      EXPECT_GT(spec.drafted, 0);  // the prompt repeats itself: lookup proposes drafts
    }
  }
}

TEST(SpecBench, BadArgumentsGiveOneClearError) {
  auto model = test::load_stories260k();
  ASSERT_NE(model, nullptr);
  ThreadPool pool(1);
  EXPECT_EQ(run_spec_bench(*model, repeat_task(), pld(), 8, 1, pool, -1.0f).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_spec_bench(*model, repeat_task(), pld(), 0, 1, pool).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run_spec_bench(*model, repeat_task(), pld(), 8, 0, pool).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine

// generate(): stop reasons, limits and errors, on the real stories260K model.
#include "peregrine/engine/generator.h"

#include <gtest/gtest.h>

#include "peregrine/formats/model_file.h"
#include "test_models.h"

namespace peregrine {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_NE(model_, nullptr);
    options_.sampling.temperature = 0.0f;
  }
  Expected<GenerationStats> run(std::vector<std::int32_t>* out = nullptr) {
    return generate(*model_, prompt_, options_, pool_, [&](std::int32_t id) {
      if (out) out->push_back(id);
    });
  }
  std::unique_ptr<LlamaModel> model_;
  ThreadPool pool_{2};
  GenerateOptions options_;
  std::vector<std::int32_t> prompt_ = {1, 403, 407, 261, 378};  // <s> Once upon a time
};

TEST_F(GeneratorTest, StopsAtMaxTokens) {
  options_.max_new_tokens = 7;
  std::vector<std::int32_t> out;
  auto s = run(&out);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->stop, StopReason::kMaxTokens);
  EXPECT_EQ(s->generated_tokens, 7);
  EXPECT_EQ(out.size(), 7u);
  EXPECT_EQ(s->prompt_tokens, 5);
  EXPECT_GT(s->ttft_ms, 0.0);
  EXPECT_GT(s->prefill_tps, 0.0);
  EXPECT_GT(s->decode_tps, 0.0);
}

TEST_F(GeneratorTest, ZeroTokensRunsNothing) {
  options_.max_new_tokens = 0;
  auto s = run();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->generated_tokens, 0);
}

TEST_F(GeneratorTest, StopsWhenTheContextIsFull) {
  options_.max_new_tokens = 100;
  options_.ctx_len = 16;
  auto s = run();
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_EQ(s->stop, StopReason::kContextFull);
  EXPECT_EQ(s->generated_tokens, 16 - 5 + 1);  // the token sampled at the last position is kept
}

TEST_F(GeneratorTest, StopsAtEndOfSequenceWithoutReportingIt) {
  options_.max_new_tokens = 10;
  std::vector<std::int32_t> greedy;
  ASSERT_TRUE(run(&greedy));
  options_.eos_id = greedy[3];  // pretend the 4th greedy token is EOS
  std::vector<std::int32_t> out;
  auto s = run(&out);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stop, StopReason::kEndOfSequence);
  EXPECT_EQ(out, std::vector<std::int32_t>(greedy.begin(), greedy.begin() + 3));
}

TEST_F(GeneratorTest, Errors) {
  prompt_.clear();
  EXPECT_EQ(run().status().code(), ErrorCode::kInvalidArgument);
  prompt_.assign(600, 1);
  auto long_prompt = run();
  EXPECT_EQ(long_prompt.status().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(long_prompt.status().message().find("exceeds the available context size"), std::string::npos);
  prompt_ = {1, 9999};
  EXPECT_EQ(run().status().code(), ErrorCode::kOutOfRange);  // token id past the vocabulary
  prompt_ = {1};
  options_.ctx_len = 100000;
  EXPECT_EQ(run().status().code(), ErrorCode::kInvalidArgument);
  options_.ctx_len = 0;
  options_.sampling.temperature = -1.0f;
  EXPECT_EQ(run().status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine

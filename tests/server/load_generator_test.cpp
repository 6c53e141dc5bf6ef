// The load generator (src/tools/load_generator.cpp) against a running server: it lives with the
// server tests, whose process helpers it uses.
#include "peregrine/tools/load_generator.h"

#include <gtest/gtest.h>

#include <set>

#include "peregrine/model/lora_adapter.h"
#include "server_process.h"
#include "server_test_util.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

TEST(LoadGenerator, QuantileInterpolatesBetweenOrderStatistics) {
  EXPECT_EQ(quantile({}, 0.5), 0);
  EXPECT_EQ(quantile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9), 10);
  EXPECT_DOUBLE_EQ(quantile({0, 100}, 0.99), 99);
}

TEST(LoadGenerator, PromptsHaveTheRequestedLengthAndSharedPrefix) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
  ASSERT_FALSE(text.empty());
  auto prompts = build_prompts(text, *tok, 16, 96, 64, 7);
  ASSERT_TRUE(prompts) << prompts.status().message();
  ASSERT_EQ(prompts->size(), 16u);
  const auto first = tok->encode((*prompts)[0], true);
  std::set<std::string> distinct;
  for (const auto& p : *prompts) {
    const auto ids = tok->encode(p, true);
    EXPECT_LE(ids.size(), 96u);
    EXPECT_GE(ids.size(), 90u);  // one word short of the budget at most
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 58, first.begin())) << "the first ~64 tokens are shared";
    distinct.insert(p);
  }
  EXPECT_EQ(distinct.size(), 16u);
  EXPECT_EQ(*build_prompts(text, *tok, 4, 96, 64, 7), std::vector<std::string>(prompts->begin(), prompts->begin() + 4));
  EXPECT_FALSE(build_prompts("   ", *tok, 1, 8, 0, 0));
  EXPECT_FALSE(build_prompts(text, *tok, 1, 8, 9, 0));
}

TEST(LoadGenerator, RejectsBadOptions) {
  const std::vector<std::string> prompts = {"x"};
  LoadOptions o;
  o.concurrency = 0;
  EXPECT_FALSE(run_load(o, prompts));
  o.concurrency = 1;
  EXPECT_FALSE(run_load(o, {}));
  o.url = "not a url";
  EXPECT_FALSE(run_load(o, prompts));
  o.url = "http://127.0.0.1:1";
  o.models = {"a", ""};
  EXPECT_FALSE(run_load(o, prompts));
}

TEST(LoadGenerator, ConnectionErrorsAreCountedByKind) {
  LoadOptions o;
  o.url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.requests = 3;
  o.concurrency = 2;
  auto report = run_load(o, std::vector<std::string>{"Once upon a time"});
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->succeeded, 0);
  EXPECT_EQ(report->errors, (std::map<std::string, std::int32_t>{{"connection_Connection", 3}}));
  const nlohmann::json j = report->to_json();
  for (const char* key : {"requests", "concurrency", "errors", "req_per_s", "output_tps", "ttft_ms", "itl_ms", "e2e_ms"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["ttft_ms"], nlohmann::json::parse(R"({"p50": 0.0, "p90": 0.0, "p99": 0.0})"));
}

// Against a real `peregrine serve` (stories260K, ASCII text: one text chunk per token): every
// stream completes, so the streamed chunks are the completion tokens the usage reports.
TEST(LoadGenerator, StreamedChunksOfCompletedStreamsAreTheirTokens) {
  test::ServerProcess server({"--parallel", "2"});
  ASSERT_TRUE(server.ready()) << server.log();
  LoadOptions o;
  o.url = server.url();
  o.requests = 4;
  o.concurrency = 2;
  o.max_tokens = 12;
  o.stream = true;
  auto report = run_load(o, std::vector<std::string>{"Once upon a time", "The little dog"});
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->succeeded, 4);
  EXPECT_EQ(report->output_tokens, 4 * 12);
  EXPECT_EQ(report->streamed_chunks, report->output_tokens);
  EXPECT_DOUBLE_EQ(report->streamed_cps, static_cast<double>(report->streamed_chunks) / report->wall_s);
  const nlohmann::json j = report->to_json();
  EXPECT_EQ(j["streamed_chunks"], 48);
}

// Requests cycle through LoadOptions::models (a serve with one LoRA adapter beside the base):
// the base's and the adapter's names succeed, an unknown name is a 404 for its requests only —
// request i carries models[i % 3].
TEST(LoadGenerator, RequestsCycleThroughTheModels) {
  auto base = test::load_stories260k();
  ASSERT_TRUE(base);
  const std::string dir = test::make_temp_dir();
  ASSERT_TRUE(save_peft_adapter(test::random_lora_adapter(base->file(), 4, 8.0f, 1, {"attn_q", "ffn_up"}), dir + "/poet", "stories260K").is_ok());
  test::ServerProcess server({"--parallel", "3", "--alias", "base", "--lora", "poet=" + dir + "/poet"});
  ASSERT_TRUE(server.ready()) << server.log();
  LoadOptions o;
  o.url = server.url();
  o.requests = 6;
  o.concurrency = 3;
  o.max_tokens = 4;
  o.models = {"poet", "base", "painter"};
  auto report = run_load(o, std::vector<std::string>{"Once upon a time"});
  ASSERT_TRUE(report) << report.status().message();
  EXPECT_EQ(report->succeeded, 4);
  EXPECT_EQ(report->output_tokens, 4 * 4);
  EXPECT_EQ(report->errors, (std::map<std::string, std::int32_t>{{"http_404", 2}}));
}

}  // namespace
}  // namespace peregrine

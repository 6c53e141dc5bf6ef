// `peregrine chat` (and `generate --chat`) end to end: a three-turn conversation with a real
// instruct model read from a pipe, each later turn prefilling only what is new (the earlier
// turns' K/V come from the engine's prefix cache, whole blocks of 16); /reset, /exit, a full
// context reported without ending the program; bad flags rejected.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "real_models.h"
#include "run_cli.h"

namespace peregrine {
namespace {

struct Turn {
  long long prompt = 0, cached = 0, prefilled = 0, reply = 0;
};

/// The "[prompt P tokens: C from the KV cache, F prefilled; reply R tokens, ...]" lines of stderr.
std::vector<Turn> turns_of(const std::string& err) {
  static const std::regex line(R"(\[prompt (\d+) tokens: (\d+) from the KV cache, (\d+) prefilled; reply (\d+) tokens)");
  std::vector<Turn> out;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it) {
    out.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), std::stoll((*it)[3]), std::stoll((*it)[4])});
  }
  return out;
}

TEST(ChatCli, ThreeTurnsWithARealInstructModelPrefillOnlyTheNewTurn) {
  const test::RealModelEntry model = test::real_model("qwen2.5-coder-0.5b-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const auto r = test::run_cli_with_input({"chat", "-m", model.path, "--temp", "0", "-n", "48"},
                                          "What is the capital of France?\nAnd what is the capital of Italy?\nThank you!\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Turn> turns = turns_of(r.err);
  ASSERT_EQ(turns.size(), 3u) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  EXPECT_EQ(turns[0].cached, 0);
  for (std::size_t k = 1; k < turns.size(); ++k) {
    // Every whole block of the previous turn's prompt is reused; what is prefilled is the new
    // turn (the previous reply, the new message) plus at most a block's remainder.
    EXPECT_GE(turns[k].cached, turns[k - 1].prompt / 16 * 16) << "turn " << k + 1 << "\n" << r.err;
    EXPECT_LE(turns[k].prefilled, turns[k].prompt - turns[k - 1].prompt + 16) << "turn " << k + 1;
    EXPECT_GT(turns[k].reply, 0);
  }
}

TEST(ChatCli, GenerateChatAppliesTheTemplateToOnePrompt) {
  const test::RealModelEntry model = test::real_model("qwen2.5-coder-0.5b-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const auto r = test::run_cli({"generate", "-m", model.path, "--chat", "--temp", "0", "-n", "32", "-p",
                                "What is the capital of France?"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("<|im_start|>"), std::string::npos) << "the template is not echoed";
}

TEST(ChatCli, ResetExitAndAFullContext) {
  // stories260K has no template of its own: chatml. A 64-token context fills on the second turn.
  const auto r = test::run_cli_with_input({"chat", "--ctx", "64", "--temp", "0", "-n", "8"},
                                          "Tom had a ball.\n/reset\nTom had a ball.\n"
                                          "Once upon a time there was a little girl who liked to play in the park with her dog.\n"
                                          "/exit\nnever read\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[conversation reset]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
  const std::vector<Turn> turns = turns_of(r.err);
  ASSERT_EQ(turns.size(), 2u) << r.err;
  EXPECT_EQ(turns[1].prompt, turns[0].prompt) << "after /reset the conversation starts over";
}

TEST(ChatCli, BadFlagsAreRejected) {
  test::expect_clean_error(test::run_cli_with_input({"chat", "-n", "0"}, ""), "-n must be >= 1");
  test::expect_clean_error(test::run_cli_with_input({"chat", "--ctx", "999999999"}, ""), "longer than the model's context");
  test::expect_clean_error(test::run_cli_with_input({"chat", "--chat-template", "nope"}, ""), "nope");
}

}  // namespace
}  // namespace peregrine

// `peregrine train-draft --kind eagle` end to end on stories260K: a short run writes a folder in
// the published EAGLE layout that spec/eagle_head reads back, with the progress and summary
// lines; one clean error line for each bad request (missing data file, bad options, a target
// the trainer does not cover, an unknown kind).
#include <gtest/gtest.h>

#include "peregrine/spec/eagle_head.h"
#include "run_cli.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

TEST(TrainDraft, EagleWritesThePublishedLayout) {
  if (!training_library_built()) GTEST_SKIP() << "built without libtorch (no libperegrine_train.so)";
  const std::string out = make_temp_dir() + "/eagle";
  const CliResult r = run_cli({"train-draft", "-m", stories260k_path(), "--kind", "eagle", "-o", out, "--data", training_text_path(),
                               "--steps", "4", "--batch", "2", "--seq", "32", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("EAGLE-1 head (hidden 64, 1 decoder layer)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("train-draft: 4/4 steps"), std::string::npos) << r.err;
  auto head = load_eagle_head(out, 64, 512);
  ASSERT_TRUE(head) << head.status().message();
  EXPECT_EQ(head->intermediate, 172);
  EXPECT_EQ(head->kv_heads, 4);
  EXPECT_EQ(head->tensors.count("embed_tokens.weight"), 1u);
}

TEST(TrainDraft, BadEagleRequestsGiveOneCleanErrorLine) {
  const std::string out = make_temp_dir() + "/eagle", text = training_text_path();
  if (!training_library_built()) {
    expect_clean_error(run_cli({"train-draft", "-m", stories260k_path(), "--kind", "eagle", "-o", out, "--data", text}),
                       "no training library");
    return;
  }
  const auto eagle = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train-draft", "--kind", "eagle", "-o", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  expect_clean_error(eagle({"-m", stories260k_path(), "--data", "/nonexistent/text.txt"}), "/nonexistent/text.txt");
  expect_clean_error(eagle({"-m", stories260k_path(), "--data", text, "--seq", "2"}), "--seq must be >= 3");
  expect_clean_error(eagle({"-m", stories260k_path(), "--data", text, "--noise", "-1"}), "--noise must be >= 0");
  expect_clean_error(eagle({"-m", stories260k_path(), "--data", text, "--lr", "0"}), "--lr must be > 0");
  expect_clean_error(eagle({"-m", stories260k_path(), "--data", text, "--seq", "4096"}), "longer than the target's context");
  expect_clean_error(eagle({"-m", testdata_dir() + "/gguf-f32-mixtral.gguf", "--data", text}), "Mixture-of-Experts");
  expect_clean_error(run_cli({"train-draft", "-m", stories260k_path(), "--kind", "hydra", "-o", out, "--data", text}),
                     "--kind 'hydra' is not medusa or eagle");
}

}  // namespace
}  // namespace peregrine::test

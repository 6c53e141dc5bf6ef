// `peregrine finetune` end to end on stories260K: a short LoRA run and a short QLoRA run each
// write a PEFT folder (with the progress, summary and held-out perplexity lines) that
// `generate --lora` and `lora merge` load; one clean error line for each bad request (rank 0,
// an unknown target, a missing data file, a window longer than the context, a family training
// does not cover).
#include <gtest/gtest.h>

#include <filesystem>

#include "run_cli.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

TEST(Finetune, WritesAnAdapterThatGenerateAndMergeLoad) {
  if (!training_library_built()) GTEST_SKIP() << "built without libtorch (no libperegrine_train.so)";
  const std::string dir = make_temp_dir();
  const std::string eval = dir + "/eval.txt";
  write_file(eval, "The tower was built in 1889 . It is the tallest structure in the city , and it was designed by an engineer .\n");
  for (const char* kind : {"lora", "qlora"}) {
    const std::string out = dir + "/" + kind;
    std::vector<std::string> args = {"finetune", "-m", stories260k_path(), "-o", out, "--data", training_text_path(), "--eval-data", eval,
                                     "--steps", "3", "--batch", "2", "--seq-len", "32", "--lora-r", "4", "--target", "q,v,down",
                                     "-t", "1"};
    if (std::string(kind) == "qlora") args.push_back("--qlora");
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string(kind) == "qlora" ? "QLoRA adapter, rank 4, alpha 16, 15 weights" : "LoRA adapter, rank 4, alpha 16, 15 weights"),
              std::string::npos)
        << r.out;
    EXPECT_NE(line_starting_with(r.out, "held-out perplexity").find("before"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("finetune: 3/3 steps"), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_regular_file(out + "/adapter_config.json"));
    EXPECT_TRUE(std::filesystem::is_regular_file(out + "/adapter_model.safetensors"));
    const CliResult g = run_cli({"generate", "-m", stories260k_path(), "--lora", out, "-n", "8", "-p", "Once upon a time"});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("Once upon a time"), std::string::npos) << g.out;
    const CliResult m = run_cli({"lora", "merge", "-m", stories260k_path(), "--lora", out, "-o", dir + "/" + kind + "-merged.gguf"});
    EXPECT_EQ(m.exit_code, 0) << m.err;
  }
}

TEST(Finetune, BadRequestsGiveOneCleanErrorLine) {
  const std::string out = make_temp_dir() + "/adapter", text = training_text_path();
  if (!training_library_built()) {
    expect_clean_error(run_cli({"finetune", "-m", stories260k_path(), "-o", out, "--data", text}), "no training library");
    return;
  }
  const auto finetune = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"finetune", "-o", out, "--steps", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const std::string m = stories260k_path();
  expect_clean_error(finetune({"-m", m, "--data", text, "--lora-r", "0"}), "--lora-r must be >= 1");
  expect_clean_error(finetune({"-m", m, "--data", text, "--target", "q,lm_head"}), "--target 'lm_head' is not one of q,k,v,o,gate,up,down");
  expect_clean_error(finetune({"-m", m, "--data", "/nonexistent/text.txt"}), "/nonexistent/text.txt");
  expect_clean_error(finetune({"-m", m, "--data", text, "--eval-data", "/nonexistent/eval.txt"}), "/nonexistent/eval.txt");
  expect_clean_error(finetune({"-m", m, "--data", text, "--seq-len", "4096"}), "longer than the target's context");
  expect_clean_error(finetune({"-m", m, "--data", text, "--lora-alpha", "-1"}), "--lora-alpha must be > 0");
  expect_clean_error(finetune({"-m", testdata_dir() + "/gguf-f32-mixtral.gguf", "--data", text}), "Mixture-of-Experts");
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace peregrine::test

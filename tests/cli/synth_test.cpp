// `peregrine synth` end to end: a small shape written in each format, loaded back by the other
// verbs, deterministic bytes; bad input gives one clean error line.
#include <gtest/gtest.h>

#include <filesystem>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

TEST(Synth, GgufGeneratesWithItsCopiedTokenizer) {
  const std::string path = make_temp_dir() + "/s.gguf";
  const CliResult w = run_cli({"synth", "--shape", "stories260k", "-o", path, "--dtype", "q8_0", "--seed", "5"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("wrote " + path + ": stories260k q8_0, seed 5, 47 tensors"), std::string::npos) << w.out;
  EXPECT_NE(w.out.find("5 matrices with rows not a multiple of 32 values are f16"), std::string::npos) << w.out;
  const CliResult g = run_cli({"generate", "-m", path, "-n", "12", "--temp", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("generated_tokens=12"), std::string::npos) << g.err;
}

TEST(Synth, SafetensorsFolderLoads) {
  const std::string dir = make_temp_dir() + "/hf";
  const CliResult w = run_cli({"synth", "--shape", "stories260k", "-o", dir, "--format", "safetensors", "--dtype", "bf16"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/config.json"));
  const CliResult i = run_cli({"inspect", "-m", dir, "--tokenizer", shared_dir() + "/models/stories260K/tok512.bin"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("format:       hf"), std::string::npos) << i.out;
  EXPECT_NE(line_starting_with(i.out, "blk.4.ffn_down.weight ").find(" bf16 "), std::string::npos) << i.out;
}

TEST(Synth, SameSeedSameFile) {
  const std::string dir = make_temp_dir();
  for (const char* name : {"/a.gguf", "/b.gguf"}) {
    ASSERT_EQ(run_cli({"synth", "--shape", "stories260k", "-o", dir + name, "--dtype", "q4_0", "-t", name[1] == 'a' ? "1" : "2"}).exit_code, 0);
  }
  EXPECT_EQ(read_file(dir + "/a.gguf"), read_file(dir + "/b.gguf"));
}

TEST(Synth, BadInputIsOneCleanError) {
  const std::string dir = make_temp_dir();
  expect_clean_error(run_cli({"synth", "--shape", "llama9-1t", "-o", dir + "/x.gguf"}), "unknown shape 'llama9-1t' (known: tinyllama-1.1b");
  expect_clean_error(run_cli({"synth", "--shape", "stories260k", "-o", "/nonexistent-dir/x.gguf"}), "cannot create /nonexistent-dir/x.gguf");
  expect_clean_error(run_cli({"synth", "--shape", "stories260k", "-o", dir + "/hf", "--format", "safetensors", "--dtype", "q4_0"}),
                     "safetensors cannot hold q4_0");
  expect_clean_error(run_cli({"synth", "--shape", "stories260k", "-o", dir + "/x.gguf", "--dtype", "q5_1"}), "--dtype 'q5_1'");
  expect_clean_error(run_cli({"synth", "--shape", "stories260k", "-o", dir + "/x.gguf", "--format", "onnx"}), "--format 'onnx'");
  expect_clean_error(run_cli({"synth", "--shape", "stories260k", "-o", dir + "/x.gguf", "--vocab", shared_dir() + "/tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf"}),
                     "has 32000 tokens but the model's vocabulary has 512");
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
  const CliResult missing = run_cli({"synth", "-o", dir + "/x.gguf"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--shape is required"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace peregrine::test

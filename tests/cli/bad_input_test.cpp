// Bad input to the CLI: one clear error line on stderr, a non-zero exit, no crash, and nothing
// on stdout that looks like output.
#include <gtest/gtest.h>

#include "run_cli.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string stories(const std::string& file) { return shared_dir() + "/models/stories260K/" + file; }

CliResult generate_with(const std::string& model) {
  return run_cli({"generate", "-m", model, "-n", "4"});
}

TEST(CliBadInput, MissingFile) { expect_clean_error(generate_with("/nonexistent/model.gguf"), "no such file"); }

TEST(CliBadInput, EmptyFile) {
  const std::string path = make_temp_dir() + "/empty.gguf";
  write_file(path, "");
  expect_clean_error(generate_with(path), "empty");
}

TEST(CliBadInput, Directory) { expect_clean_error(generate_with(make_temp_dir()), "directory"); }

TEST(CliBadInput, TruncatedModelsAtSeveralOffsets) {
  const std::string dir = make_temp_dir();
  for (const std::string name : {"stories260K.bin", "stories260K.gguf"}) {
    const std::string bytes = read_file(stories(name));
    for (std::size_t cut : {std::size_t{3}, std::size_t{27}, std::size_t{200}, std::size_t{5000},
                            bytes.size() / 2, bytes.size() - 1}) {
      SCOPED_TRACE(name + " cut at " + std::to_string(cut));
      const std::string path = dir + "/" + name;
      write_file(path, bytes.substr(0, cut));
      const CliResult r = generate_with(path);
      expect_clean_error(r, "");
      EXPECT_TRUE(r.err.find("truncated") != std::string::npos || r.err.find("bad magic") != std::string::npos ||
                  r.err.find("header") != std::string::npos)
          << r.err;
    }
  }
}

TEST(CliBadInput, WrongMagic) {
  const std::string path = make_temp_dir() + "/bad.gguf";
  std::string bytes = read_file(stories("stories260K.gguf"));
  bytes[0] = 'X';
  write_file(path, bytes);
  expect_clean_error(generate_with(path), "bad magic");
}

TEST(CliBadInput, PromptLongerThanContext) {
  const CliResult r = run_cli({"generate", "-f", shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt", "-n", "4"});
  expect_clean_error(r, "exceeds the available context size");
}

TEST(CliBadInput, NegativeTemperature) { expect_clean_error(run_cli({"generate", "--temp", "-1"}), "temperature"); }
TEST(CliBadInput, TopPAboveOne) { expect_clean_error(run_cli({"generate", "--top-p", "1.5"}), "top-p"); }
TEST(CliBadInput, MinPAboveOne) { expect_clean_error(run_cli({"generate", "--min-p", "2"}), "min-p"); }
TEST(CliBadInput, AbsurdThreadCount) { expect_clean_error(run_cli({"generate", "-t", "2147483647"}), "threads"); }
TEST(CliBadInput, UnwritableStatsJson) {
  expect_clean_error(run_cli({"generate", "--stats-json", "/nonexistent/dir/stats.json"}), "cannot write stats");
}
TEST(CliBadInput, MissingExplicitTokenizer) {
  expect_clean_error(run_cli({"inspect", "--tokenizer", "/nonexistent/tokenizer.model"}), "tokenizer");
}
TEST(CliBadInput, UnknownKvType) { expect_clean_error(run_cli({"generate", "--kv-type", "q4_0"}), "f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2"); }
TEST(CliBadInput, ZeroThreads) { expect_clean_error(run_cli({"generate", "-t", "0"}), "threads"); }
TEST(CliBadInput, NonNumericArgument) { expect_clean_error(run_cli({"generate", "-n", "many"}), "many"); }
TEST(CliBadInput, UnknownVerb) { expect_clean_error(run_cli({"fly"}), "fly"); }
TEST(CliBadInput, MissingPromptFile) { expect_clean_error(run_cli({"generate", "-f", "/nonexistent.txt"}), "cannot read file /nonexistent.txt"); }

}  // namespace
}  // namespace peregrine::test

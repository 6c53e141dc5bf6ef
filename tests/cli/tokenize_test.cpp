// `peregrine tokenize -m VOCAB.gguf`: a vocabulary-only GGUF (no weights) is enough, as for
// llama-tokenize; the ids equal llama.cpp's test vectors in shared/tokenizers/gguf-vocab.
#include <gtest/gtest.h>

#include "run_cli.h"
#include "test_paths.h"
#include "tokenizer/test_util.h"

namespace peregrine::test {
namespace {

/// "[1, 2, 3]" as `tokenize --ids` prints it.
std::string ids_line(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return "[" + s + "]\n";
}

class TokenizeVocabOnly : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizeVocabOnly, IdsEqualLlamaCppVectors) {
  const std::string vocab = vocab_dir() + "/ggml-vocab-" + GetParam() + ".gguf";
  const auto inputs = split_inputs(read_file(vocab + ".inp"));
  const auto outputs = parse_outputs(read_file(vocab + ".out"));
  ASSERT_EQ(inputs.size(), outputs.size());
  const TempDir dir;
  const std::string text = dir.path + "/text.txt";
  std::size_t checked = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    // A few inputs with words, spaces, punctuation and non-ASCII text: the binary path is what
    // is tested here (tests/tokenizer checks every vector in-process).
    if (inputs[i].find("Hello") == std::string::npos && inputs[i].find("🦙") == std::string::npos) continue;
    write_file(text, inputs[i]);
    const CliResult r = run_cli({"tokenize", "-m", vocab, "-f", text, "--no-bos", "--ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ids_line(outputs[i])) << escaped(inputs[i]);
    ++checked;
  }
  EXPECT_GE(checked, 4u);
}

INSTANTIATE_TEST_SUITE_P(Gguf, TokenizeVocabOnly, ::testing::Values("llama-spm", "gpt-2"),
                         [](const auto& info) { return info.param == "gpt-2" ? std::string("gpt_2") : std::string("llama_spm"); });

TEST(Tokenize, VocabOnlyGgufAddsBosAndPrintsPieces) {
  const std::string vocab = vocab_dir() + "/ggml-vocab-llama-spm.gguf";
  const CliResult ids = run_cli({"tokenize", "-m", vocab, "--ids", "Hello world"});
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(ids.out, "[1, 15043, 3186]\n");
  const CliResult pieces = run_cli({"tokenize", "-m", vocab, "Hello world"});
  ASSERT_EQ(pieces.exit_code, 0) << pieces.err;
  EXPECT_EQ(pieces.out, "     1 -> '<s>'\n 15043 -> '\u2581Hello'\n  3186 -> '\u2581world'\n");
}

TEST(Tokenize, ModelGgufReadsItsTokenizerWithoutTheWeights) {
  // A K-quant model: its tokenizer metadata is all tokenize reads.
  const CliResult r = run_cli({"tokenize", "-m", shared_dir() + "/models/kquant-test/tiny-llama-256.Q4_K_M.gguf", "--ids",
                               "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CliResult stories = run_cli({"tokenize", "-m", shared_dir() + "/models/stories260K/stories260K.gguf", "--ids",
                                     "Once upon a time"});
  ASSERT_EQ(stories.exit_code, 0) << stories.err;
  EXPECT_EQ(r.out, stories.out);  // the same stories260K vocabulary
  EXPECT_EQ(r.out.rfind("[1, ", 0), 0u) << r.out;
}

TEST(Tokenize, DamagedVocabGgufIsOneCleanError) {
  const TempDir dir;
  const std::string path = dir.path + "/cut.gguf";
  const std::string bytes = read_file(vocab_dir() + "/ggml-vocab-llama-spm.gguf");
  write_file(path, bytes.substr(0, bytes.size() / 2));
  expect_clean_error(run_cli({"tokenize", "-m", path, "hi"}), "truncated");
}

}  // namespace
}  // namespace peregrine::test

// llama.cpp's tokenizer test vectors (test-tokenizer-0, add_special=false, parse_special=false)
// for every vocab-only GGUF in shared/tokenizers/gguf-vocab: exact ids and round trips.
#include <gtest/gtest.h>

#include "peregrine/tokenizer/gguf_tokenizer.h"
#include "test_util.h"

namespace peregrine {
namespace {

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, MatchesLlamaCppIdsExactly) {
  const std::string base = test::vocab_dir() + "/ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load_gguf_tokenizer_file(base);
  ASSERT_TRUE(tok) << tok.status().message();
  const auto inputs = test::split_inputs(test::read_file(base + ".inp"));
  const auto outputs = test::parse_outputs(test::read_file(base + ".out"));
  ASSERT_EQ(inputs.size(), outputs.size()) << "inputs and output lines disagree";
  ASSERT_GT(inputs.size(), 40u);
  std::size_t checked = 0, mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i, ++checked) {
    const auto got = (*tok)->encode(inputs[i], /*add_bos=*/false);
    if (got != outputs[i]) {
      ++mismatches;
      ADD_FAILURE() << GetParam() << " input #" << i << " " << test::escaped(inputs[i])
                    << "\n  expected " << test::ids_string(outputs[i]) << "\n  got      " << test::ids_string(got);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(checked, inputs.size());
}

TEST_P(VocabVectors, DecodeInvertsEncode) {
  const std::string base = test::vocab_dir() + "/ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load_gguf_tokenizer_file(base);
  ASSERT_TRUE(tok) << tok.status().message();
  for (const auto& text : test::split_inputs(test::read_file(base + ".inp"))) {
    EXPECT_EQ((*tok)->decode((*tok)->encode(text, false)), text) << test::escaped(text);
    const auto with_bos = (*tok)->encode(text, true);
    EXPECT_EQ((*tok)->decode(with_bos), text) << "with BOS: " << test::escaped(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "falcon", "starcoder", "deepseek-coder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace peregrine

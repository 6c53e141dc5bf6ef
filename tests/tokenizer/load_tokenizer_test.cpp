// load_tokenizer / load_tokenizer_file: finding the tokenizer that belongs to a model.
#include "peregrine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

const std::vector<std::int32_t> kOnceUponATime = {1, 403, 407, 261, 378};

std::string stories(const std::string& f) { return test::shared_dir() + "/models/stories260K/" + f; }
std::string llama2(const std::string& f) { return test::shared_dir() + "/tokenizers/llama2/" + f; }

TEST(LoadTokenizer, Llama2cModelFindsTok512BesideIt) {
  auto model = load_model_file(stories("stories260K.bin"));
  ASSERT_TRUE(model) << model.status().message();
  auto tok = load_tokenizer(*model);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("Once upon a time", true), kOnceUponATime);
}

TEST(LoadTokenizer, GgufModelUsesItsMetadata) {
  auto model = load_model_file(stories("stories260K.gguf"));
  ASSERT_TRUE(model) << model.status().message();
  auto tok = load_tokenizer(*model);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("Once upon a time", true), kOnceUponATime);
}

TEST(LoadTokenizer, OverrideTakesPrecedenceAndMustFit) {
  auto model = load_model_file(stories("stories260K.bin"));
  ASSERT_TRUE(model) << model.status().message();
  auto other = load_tokenizer(*model, test::shared_dir() + "/models/aidreams260K/tok512.bin");
  ASSERT_TRUE(other) << other.status().message();
  EXPECT_NE((*other)->encode("Once upon a time", true), kOnceUponATime);
  auto too_big = load_tokenizer(*model, llama2("tokenizer.bin"));
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.status().code(), ErrorCode::kInvalidArgument);
  auto missing = load_tokenizer(*model, "/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(LoadTokenizer, HuggingFaceFolderAndMissingTokenizers) {
  test::TempDir dir;
  ModelFile hf;
  hf.format = ModelFormat::kHuggingFace;
  hf.path = dir.path;
  auto none = load_tokenizer(hf);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  fs::copy_file(llama2("tokenizer.model"), dir.path + "/tokenizer.model");
  auto tok = load_tokenizer(hf);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "sentencepiece");
  EXPECT_EQ((*tok)->encode("Hello world", true), (std::vector<std::int32_t>{1, 15043, 3186}));

  ModelFile l2c;
  l2c.format = ModelFormat::kLlama2c;
  l2c.path = dir.path + "/model.bin";
  auto lonely = load_tokenizer(l2c);
  ASSERT_FALSE(lonely);
  EXPECT_EQ(lonely.status().code(), ErrorCode::kNotFound);
}

TEST(LoadTokenizerFile, DetectsEachFormat) {
  struct Case { std::string path, kind; };
  for (const auto& c : {Case{llama2("tokenizer.bin"), "spm"}, Case{llama2("tokenizer.model"), "sentencepiece"},
                        Case{test::vocab_dir() + "/ggml-vocab-gpt-2.gguf", "bpe"},
                        Case{stories("stories260K.gguf"), "spm"}, Case{stories(""), "spm"}}) {
    auto tok = load_tokenizer_file(c.path);
    ASSERT_TRUE(tok) << c.path << ": " << tok.status().message();
    EXPECT_EQ((*tok)->kind(), c.kind) << c.path;
  }
  auto missing = load_tokenizer_file("/nonexistent/tok.bin");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  auto bert = load_tokenizer_file(test::vocab_dir() + "/ggml-vocab-bert-bge.gguf");
  ASSERT_FALSE(bert);
  EXPECT_EQ(bert.status().code(), ErrorCode::kUnsupported);
  auto not_sp = load_tokenizer_file(stories("greedy_once_upon_a_time.txt"));
  ASSERT_FALSE(not_sp);
  EXPECT_EQ(not_sp.status().code(), ErrorCode::kCorruptFile);
}

}  // namespace
}  // namespace peregrine

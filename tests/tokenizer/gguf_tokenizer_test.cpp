// Tokenizers from GGUF metadata: which models are accepted and how bad metadata is reported.
#include "peregrine/tokenizer/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include "gguf_builder.h"
#include "test_util.h"

namespace peregrine {
namespace {

const std::string kSp = "\xE2\x96\x81";

// A tiny SentencePiece vocabulary: <unk> <s> </s> ▁ a b ▁a ab.
test::GgufBuilder tiny_llama(const std::string& model = "llama") {
  test::GgufBuilder b;
  b.str("tokenizer.ggml.model", model)
      .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", kSp, "a", "b", kSp + "a", "ab"})
      .f32s("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -4, -5})
      .i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1});
  return b;
}

Expected<std::unique_ptr<Tokenizer>> load(const test::GgufBuilder& b, std::vector<std::uint8_t>& keep) {
  keep = b.bytes();
  auto g = GgufFile::parse(keep, "test.gguf");
  if (!g) return g.status();
  return load_gguf_tokenizer(*g, "test.gguf");
}

TEST(GgufTokenizer, TinyLlamaVocabulary) {
  std::vector<std::uint8_t> keep;
  auto tok = load(tiny_llama(), keep);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "spm");
  EXPECT_EQ((*tok)->bos_id(), 1);  // llama.cpp's SentencePiece defaults when the ids are absent
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos_default());
  EXPECT_EQ((*tok)->encode("ab a", true), (std::vector<std::int32_t>{1, 6, 5, 6}));
}

TEST(GgufTokenizer, AddSpacePrefixFalseIsHonored) {
  std::vector<std::uint8_t> keep;
  auto tok = load(tiny_llama().boolean("tokenizer.ggml.add_space_prefix", false)
                      .boolean("tokenizer.ggml.add_bos_token", false), keep);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("ab a", false), (std::vector<std::int32_t>{7, 6}));
  EXPECT_EQ((*tok)->decode((*tok)->encode(" a", false)), " a");  // no dummy space to drop
  EXPECT_FALSE((*tok)->add_bos_default());
}

TEST(GgufTokenizer, UnknownModelIsUnsupported) {
  for (const std::string model : {"bert", "t5", "rwkv", "no_vocab", "mystery"}) {
    std::vector<std::uint8_t> keep;
    auto tok = load(tiny_llama(model), keep);
    ASSERT_FALSE(tok) << model;
    EXPECT_EQ(tok.status().code(), ErrorCode::kUnsupported) << model;
    EXPECT_NE(tok.status().message().find(model), std::string::npos) << tok.status().message();
  }
}

TEST(GgufTokenizer, MissingTokenizerIsNotFound) {
  std::vector<std::uint8_t> keep;
  auto tok = load(test::GgufBuilder().str("general.architecture", "llama"), keep);
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.status().code(), ErrorCode::kNotFound);
}

TEST(GgufTokenizer, InconsistentMetadataIsCorrupt) {
  std::vector<std::uint8_t> keep;
  auto short_scores = load(test::GgufBuilder()
                               .str("tokenizer.ggml.model", "llama")
                               .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"})
                               .f32s("tokenizer.ggml.scores", {0, 0}), keep);
  ASSERT_FALSE(short_scores);
  EXPECT_EQ(short_scores.status().code(), ErrorCode::kCorruptFile);
  auto bad_bos = load(tiny_llama().u32("tokenizer.ggml.bos_token_id", 99), keep);
  ASSERT_FALSE(bad_bos);
  EXPECT_EQ(bad_bos.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(bad_bos.status().message().find("BOS"), std::string::npos) << bad_bos.status().message();
  auto none_bos = load(tiny_llama().u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu), keep);
  ASSERT_TRUE(none_bos) << none_bos.status().message();
  EXPECT_EQ((*none_bos)->bos_id(), -1);
  auto wrong_type = load(tiny_llama().u32("tokenizer.ggml.add_space_prefix", 1), keep);
  ASSERT_FALSE(wrong_type);
  EXPECT_EQ(wrong_type.status().code(), ErrorCode::kCorruptFile);
}

test::GgufBuilder tiny_gpt2(const std::vector<std::string>& merges, const std::string& pre) {
  test::GgufBuilder b;
  b.str("tokenizer.ggml.model", "gpt2")
      .strs("tokenizer.ggml.tokens", {"a", "b", "\xC4\xA0", "ab", "\xC4\xA0" "ab"})
      .strs("tokenizer.ggml.merges", merges)
      .str("tokenizer.ggml.pre", pre);
  return b;
}

TEST(GgufTokenizer, TinyGpt2AndItsErrors) {
  std::vector<std::uint8_t> keep;
  auto tok = load(tiny_gpt2({"a b", "\xC4\xA0 ab"}, "gpt-2"), keep);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "bpe");
  EXPECT_EQ((*tok)->bos_id(), -1);
  EXPECT_FALSE((*tok)->add_bos_default());
  EXPECT_EQ((*tok)->encode("ab ab", true), (std::vector<std::int32_t>{3, 4}));  // no BOS to add
  EXPECT_EQ((*tok)->decode((*tok)->encode("ab ab", false)), "ab ab");
  auto bad_pre = load(tiny_gpt2({"a b"}, "no-such-pre"), keep);
  ASSERT_FALSE(bad_pre);
  EXPECT_EQ(bad_pre.status().code(), ErrorCode::kUnsupported);
  auto bad_merge = load(tiny_gpt2({"ab"}, "gpt-2"), keep);
  ASSERT_FALSE(bad_merge);
  EXPECT_EQ(bad_merge.status().code(), ErrorCode::kCorruptFile);
}

}  // namespace
}  // namespace peregrine

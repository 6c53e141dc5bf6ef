// GPT-2 byte-level BPE: byte alphabet, regex pre-tokenizers, real text round trips.
#include "peregrine/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include "peregrine/tokenizer/byte_level.h"
#include "peregrine/tokenizer/gguf_tokenizer.h"
#include "peregrine/tokenizer/pretokenizer.h"
#include "test_util.h"

namespace peregrine {
namespace {

std::vector<std::string> words(const std::string& pre_name, std::string_view text) {
  auto spec = pretokenizer_spec(pre_name);
  EXPECT_TRUE(spec) << spec.status().message();
  auto pre = PreTokenizer::compile(spec->regexes);
  EXPECT_TRUE(pre) << pre.status().message();
  std::vector<std::string> out;
  for (auto w : pre->split(text)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_to_codepoint('A'), static_cast<std::uint32_t>('A'));
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);  // the last remapped byte
  EXPECT_EQ(byte_to_codepoint(0xFF), 0xFFu);
  EXPECT_EQ(byte_level_encode(" the\n"), "\xC4\xA0the\xC4\x8A");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), all);
  EXPECT_EQ(codepoint_to_byte(0x4E00), -1);
  EXPECT_EQ(byte_level_decode("\xE4\xB8\x80"), "\xE4\xB8\x80");  // outside the alphabet: verbatim
}

TEST(PreTokenizer, Gpt2Regex) {
  EXPECT_EQ(words("gpt-2", "Hello world's  test\n"), (Words{"Hello", " world", "'s", " ", " test", "\n"}));
  EXPECT_EQ(words("gpt-2", "3.14 apples!!"), (Words{"3", ".", "14", " apples", "!!"}));
  EXPECT_EQ(words("gpt-2", "a   \n\n"), (Words{"a", "   \n\n"}));
  // U+0085 (NEL) is whitespace, as in llama.cpp and Rust/Oniguruma regexes.
  EXPECT_EQ(words("gpt-2", "a\xC2\x85\xC2\x85" "b"), (Words{"a", "\xC2\x85", "\xC2\x85", "b"}));
  EXPECT_TRUE(words("gpt-2", "").empty());
}

TEST(PreTokenizer, ListsApplyInOrderAndKeepGaps) {
  EXPECT_EQ(words("starcoder", "x12 y"), (Words{"x", "1", "2", " y"}));
  EXPECT_EQ(words("falcon", "1234567 a+b"), (Words{"123", "456", "7", " a", "+", "b"}));
  EXPECT_EQ(words("default", "ab, 12345"), (Words{"ab", ",", " ", "123", "45"}));
  EXPECT_EQ(words("deepseek-coder", "Hi 42\n\xE6\x88\x91\xE6\x83\xB3"),
            (Words{"Hi", " ", "4", "2", "\n", "\xE6\x88\x91\xE6\x83\xB3"}));
}

TEST(PreTokenizer, InvalidUtf8LosesNothing) {
  const std::string text = "ab\xFF\xC3 c\xE2\x82 1\x80";
  for (const char* name : {"gpt-2", "default", "falcon", "starcoder", "deepseek-coder", "llama-bpe", "qwen2"}) {
    std::string joined;
    for (const auto& w : words(name, text)) joined += w;
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizer, UnknownNameAndBadRegex) {
  EXPECT_EQ(pretokenizer_spec("nope").status().code(), ErrorCode::kUnsupported);
  auto bad = PreTokenizer::compile({"(unclosed"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(bad.status().message().find("(unclosed"), std::string::npos);
}

class BpeRealText : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeRealText, RoundTripsAndKnownIds) {
  auto tok = load_gguf_tokenizer_file(test::vocab_dir() + "/ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "bpe");
  auto texts = test::text_lines(test::shared_dir() + "/data/wikitext-2/wiki.test.raw", 200);
  for (auto& t : test::text_lines(test::shared_dir() + "/data/tinystories/tinystories_sample.txt")) texts.push_back(t);
  texts.push_back("<|endoftext|> stays text");
  for (const auto& t : texts) EXPECT_EQ((*tok)->decode((*tok)->encode(t, false)), t) << test::escaped(t);
  // Control tokens in the text are not parsed as specials; decoding a control id gives "".
  const auto eot = (*tok)->encode("<|endoftext|>", false);
  EXPECT_GT(eot.size(), 1u);
  if ((*tok)->eos_id() >= 0) {
    EXPECT_EQ((*tok)->decode_token(-1, (*tok)->eos_id()), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, BpeRealText, ::testing::Values("gpt-2", "falcon", "starcoder", "deepseek-coder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

TEST(BpeTokenizer, Gpt2KnownIds) {
  auto tok = load_gguf_tokenizer_file(test::vocab_dir() + "/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("Hello world", false), (std::vector<std::int32_t>{15496, 995}));
  EXPECT_EQ((*tok)->piece(18435), "\xC4\xA0Hello");  // "ĠHello"
  EXPECT_EQ((*tok)->decode_token(15496, 18435), " Hello");
  EXPECT_EQ((*tok)->bos_id(), 50256);
  EXPECT_EQ((*tok)->encode("Hi", true).front(), 50256);
  // GPT-2 has a token for each of the 256 bytes, so even invalid UTF-8 round-trips. (Falcon and
  // StarCoder lack 0xFE/0xFF, which valid UTF-8 never contains; such bytes are dropped.)
  const std::string raw = "bytes \xFF\xFE\xC3 end";
  EXPECT_EQ((*tok)->decode((*tok)->encode(raw, false)), raw);
}

TEST(BpeTokenizer, UserDefinedTokensAreMatchedVerbatim) {
  auto tok = load_gguf_tokenizer_file(test::vocab_dir() + "/ggml-vocab-deepseek-coder.gguf");
  ASSERT_TRUE(tok) << tok.status().message();
  // 'ü' is a user-defined token (32009) of deepseek-coder: split out before pre-tokenizing.
  EXPECT_EQ((*tok)->encode("F\xC3\xBChrer", false), (std::vector<std::int32_t>{37, 32009, 71, 6247}));
  EXPECT_EQ((*tok)->decode_token(37, 32009), "\xC3\xBC");
}

}  // namespace
}  // namespace peregrine

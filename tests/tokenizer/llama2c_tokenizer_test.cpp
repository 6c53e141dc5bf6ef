// llama2.c tokenizer.bin reader: real files load, damaged files give one clear error.
#include "peregrine/tokenizer/llama2c_tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <random>

#include "test_util.h"

namespace peregrine {
namespace {

std::vector<std::uint8_t> tok512_bytes() {
  const std::string s = test::read_file(test::shared_dir() + "/models/stories260K/tok512.bin");
  return {s.begin(), s.end()};
}

// A tokenizer.bin image with the given header and (score, length, bytes) entries.
std::vector<std::uint8_t> image(std::int32_t max_len, const std::vector<std::pair<float, std::string>>& entries,
                                std::optional<std::int32_t> forced_len = std::nullopt) {
  std::string out;
  auto put = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(max_len);
  for (const auto& [score, piece] : entries) {
    put(score);
    put(forced_len.value_or(static_cast<std::int32_t>(piece.size())));
    out += piece;
  }
  return {out.begin(), out.end()};
}

Status parse_status(const std::vector<std::uint8_t>& bytes) {
  auto v = parse_llama2c_vocab(bytes, "tok.bin");
  return v ? Status::ok() : v.status();
}

TEST(Llama2cTokenizer, ParsesRealFiles) {
  auto v = parse_llama2c_vocab(tok512_bytes(), "tok512.bin");
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v->size(), 512);
  EXPECT_EQ(v->type(0), TokenType::kUnknown);
  EXPECT_EQ(v->type(1), TokenType::kControl);
  EXPECT_EQ(v->piece(2), "</s>");
  EXPECT_EQ(v->type(3 + 0x41), TokenType::kByte);
  EXPECT_EQ(v->byte_token(0x41), 3 + 0x41);
  EXPECT_EQ(v->find("\xE2\x96\x81Once"), 403);  // ' ' restored to "▁"
}

TEST(Llama2cTokenizer, TruncatedFileIsCorrupt) {
  auto bytes = tok512_bytes();
  for (std::size_t cut : {std::size_t{2}, std::size_t{6}, std::size_t{13}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<std::uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    const Status st = parse_status(part);
    EXPECT_EQ(st.code(), ErrorCode::kCorruptFile) << "cut at " << cut;
    EXPECT_NE(st.message().find("tok.bin"), std::string::npos) << st.message();
  }
  const Status st = parse_status({bytes.begin(), bytes.begin() + 4 + 8 + 5 + 3});
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
}

TEST(Llama2cTokenizer, BadValuesAreCorrupt) {
  const std::vector<std::pair<float, std::string>> three = {{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}};
  EXPECT_TRUE(parse_status(image(8, three)).is_ok());
  EXPECT_EQ(parse_status(image(0, three)).code(), ErrorCode::kCorruptFile);         // bad header
  EXPECT_EQ(parse_status(image(-3, three)).code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(parse_status(image(1 << 30, three)).code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(parse_status(image(4, three)).code(), ErrorCode::kCorruptFile);         // piece longer than max
  EXPECT_EQ(parse_status(image(8, three, -7)).code(), ErrorCode::kCorruptFile);     // negative length
  EXPECT_EQ(parse_status(image(8, {{0, "<unk>"}, {0, "<s>"}})).code(), ErrorCode::kCorruptFile);  // < 3 tokens
  auto nan = three;
  nan[2].first = std::numeric_limits<float>::quiet_NaN();
  const Status st = parse_status(image(8, nan));
  EXPECT_EQ(st.code(), ErrorCode::kCorruptFile);
  EXPECT_NE(st.message().find("score"), std::string::npos) << st.message();
}

TEST(Llama2cTokenizer, MissingAndEmptyFiles) {
  auto missing = load_llama2c_tokenizer("/nonexistent/tokenizer.bin");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  test::TempDir dir;
  { std::ofstream(dir.path + "/empty.bin"); }
  auto empty = load_llama2c_tokenizer(dir.path + "/empty.bin");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().code(), ErrorCode::kCorruptFile);
}

TEST(Llama2cTokenizer, RandomDamageNeverCrashes) {
  const auto good = tok512_bytes();
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    auto bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    bytes.resize(bytes.size() - rng() % 64);
    auto v = parse_llama2c_vocab(bytes, "damaged");
    if (!v) {
      EXPECT_FALSE(v.status().message().empty());
    }
  }
}

}  // namespace
}  // namespace peregrine

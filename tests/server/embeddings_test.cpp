// The embeddings API's request parsing and response body (server/embeddings.h): every input
// shape OpenAI accepts, each bad field a 400 naming it, and the base64 encoding byte for byte.
#include "peregrine/server/embeddings.h"

#include <gtest/gtest.h>

#include <cstring>

namespace peregrine {
namespace {

using Json = nlohmann::json;

EmbeddingsRequest parse_ok(std::string_view body) {
  auto r = parse_embeddings_request(body, 4, 100);
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " → " << e->message;
    return {};
  }
  return std::get<EmbeddingsRequest>(r);
}

TEST(EmbeddingsRequest, EveryInputShape) {
  EXPECT_EQ(parse_ok(R"({"input": "a cat"})").texts, std::vector<std::string>{"a cat"});
  EXPECT_EQ(parse_ok(R"({"input": ["a", "b"], "model": "m"})").texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse_ok(R"({"input": [1, 2, 3]})").token_inputs, (std::vector<std::vector<std::int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(parse_ok(R"({"input": [[1], [2, 99]]})").token_inputs, (std::vector<std::vector<std::int32_t>>{{1}, {2, 99}}));
  const EmbeddingsRequest r = parse_ok(R"({"input": "x", "encoding_format": "base64", "dimensions": 4, "user": "u"})");
  EXPECT_TRUE(r.base64);
  EXPECT_FALSE(parse_ok(R"({"input": "x", "encoding_format": "float"})").base64);
}

TEST(EmbeddingsRequest, BadFieldsAreA400NamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m"})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": ""})", "input"},
      {R"({"input": ["a", ""]})", "input"},
      {R"({"input": [[]]})", "input"},
      {R"({"input": [1, 100]})", "input"},
      {R"({"input": [-1]})", "input"},
      {R"({"input": ["a", [1]]})", "input"},
      {R"({"input": {"text": "a"}})", "input"},
      {R"({"input": "a", "encoding_format": "int8"})", "encoding_format"},
      {R"({"input": "a", "dimensions": 2})", "dimensions"},
      {R"({"input": "a", "model": 3})", "model"},
      {R"({"input": "a", "user": []})", "user"},
      {R"([1, 2])", ""},
      {R"({"input": )", ""}};
  for (const auto& [body, param] : cases) {
    auto r = parse_embeddings_request(body, 4, 100);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    EXPECT_EQ(std::get<ApiError>(r).http_status, 400) << body;
    EXPECT_EQ(std::get<ApiError>(r).param, param) << body;
  }
  std::string many = R"({"input": [)";
  for (std::size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += i == 0 ? "\"a\"" : ", \"a\"";
  auto r = parse_embeddings_request(many + "]}", 4, 100);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "input");
}

TEST(EmbeddingsResponse, FloatsOrTheirLittleEndianBytesInBase64) {
  const std::vector<std::vector<float>> v = {{1.0f, -2.5f}, {0.0f, 0.25f}};
  const Json f = embeddings_response_json("m", v, false, 7);
  EXPECT_EQ(f["object"], "list");
  EXPECT_EQ(f["model"], "m");
  EXPECT_EQ(f["usage"], Json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(f["data"].size(), 2u);
  EXPECT_EQ(f["data"][1]["index"], 1);
  EXPECT_EQ(f["data"][1]["object"], "embedding");
  EXPECT_EQ(f["data"][0]["embedding"], Json({1.0, -2.5}));
  const Json b = embeddings_response_json("m", v, true, 7);
  // 1.0f = 00 00 80 3f, -2.5f = 00 00 20 c0 (little-endian): "AACAPwAAIMA="
  EXPECT_EQ(b["data"][0]["embedding"], "AACAPwAAIMA=");
  // 0.0f, 0.25f = 00 00 00 00, 00 00 80 3e
  EXPECT_EQ(b["data"][1]["embedding"], "AAAAAAAAgD4=");
}

}  // namespace
}  // namespace peregrine

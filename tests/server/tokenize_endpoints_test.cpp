// /tokenize and /detokenize on llama's real SentencePiece vocabulary (llama.cpp's
// ggml-vocab-llama-spm.gguf): ids as Tokenizer::encode gives them, BOS only with add_special,
// control-token text parsed unless parse_special is false, pieces that concatenate back to the
// text (byte-fallback pieces of a character outside the vocabulary as byte lists, as
// llama-server sends them), detokenize inverting tokenize, and one 400 per bad field.
#include "peregrine/server/tokenize_endpoints.h"

#include <gtest/gtest.h>

#include "test_models.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

const Tokenizer& llama_spm() { return test::llamacpp_vocab("llama-spm"); }

Json ok(const std::variant<Json, ApiError>& r) {
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<Json>(r);
}

TEST(TokenizeEndpoint, IdsBosAndSpecialTokensAsLlamaServer) {
  const Tokenizer& t = llama_spm();
  const std::string text = "Once upon a time, a little girl";
  const Json plain = ok(tokenize_response(Json{{"content", text}}.dump(), t));
  EXPECT_EQ(plain["tokens"].get<std::vector<std::int32_t>>(), t.encode(text, false, ParseSpecial::kYes));
  const Json with_bos = ok(tokenize_response(Json{{"content", text}, {"add_special", true}}.dump(), t));
  ASSERT_EQ(with_bos["tokens"].size(), plain["tokens"].size() + 1);
  EXPECT_EQ(with_bos["tokens"][0], t.bos_id());
  const Json special = ok(tokenize_response(R"({"content": "<s>"})", t));
  EXPECT_EQ(special["tokens"], Json::array({t.bos_id()}));
  const Json as_text = ok(tokenize_response(R"({"content": "<s>", "parse_special": false})", t));
  EXPECT_GT(as_text["tokens"].size(), 1u);
}

TEST(TokenizeEndpoint, PiecesConcatenateToTheTextAndDetokenizeInvertsTokenize) {
  const Tokenizer& t = llama_spm();
  const std::string text = "Hello world \xF0\x9D\x84\x9E clef";  // U+1D11E: byte-fallback tokens
  const Json r = ok(tokenize_response(Json{{"content", text}, {"with_pieces", true}}.dump(), t));
  std::string joined;
  bool byte_list = false;
  for (const Json& p : r["tokens"]) {
    ASSERT_TRUE(p["id"].is_number_integer());
    if (p["piece"].is_string()) {
      joined += p["piece"].get<std::string>();
    } else {
      byte_list = true;
      for (const Json& b : p["piece"]) joined += static_cast<char>(b.get<int>());
    }
  }
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(byte_list);
  Json ids = Json::array();
  for (const Json& p : r["tokens"]) ids.push_back(p["id"]);
  EXPECT_EQ(ok(detokenize_response(Json{{"tokens", ids}}.dump(), t))["content"], text);
}

TEST(TokenizeEndpoint, BadFieldsAre400NamingThem) {
  const Tokenizer& t = llama_spm();
  const std::pair<std::variant<Json, ApiError>, const char*> cases[] = {
      {tokenize_response(R"({"content": 3})", t), "content"},
      {tokenize_response(R"({})", t), "content"},
      {tokenize_response(R"({"content": "x", "add_special": "yes"})", t), "add_special"},
      {tokenize_response(R"({"content": "x", "with_pieces": 1})", t), "with_pieces"},
      {tokenize_response(R"({"content": "x",)", t), ""},
      {tokenize_response(R"(["x"])", t), ""},
      {detokenize_response(R"({"tokens": "1 2"})", t), "tokens"},
      {detokenize_response(R"({"tokens": [1, "2"]})", t), "tokens"},
      {detokenize_response(R"({"tokens": [1, 32000]})", t), "tokens"},
      {detokenize_response(R"({"tokens": [-1]})", t), "tokens"},
  };
  for (const auto& [result, param] : cases) {
    SCOPED_TRACE(param);
    const ApiError* e = std::get_if<ApiError>(&result);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param);
    EXPECT_NE(e->message.find(param), std::string::npos) << e->message;
  }
}

}  // namespace
}  // namespace peregrine

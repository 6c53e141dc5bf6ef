#include "peregrine/server/openai_response.h"

#include <gtest/gtest.h>

#include "peregrine/server/sse_reader.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

RequestResult result(std::int64_t prompt, std::int64_t completion, FinishReason reason = FinishReason::kLength) {
  RequestResult r;
  r.reason = reason;
  r.prompt_tokens = prompt;
  r.completion_tokens = completion;
  return r;
}

const ResponseMeta kCompletion{ApiEndpoint::kCompletions, "cmpl-1", 1700000000, "stories260K"};
const ResponseMeta kChat{ApiEndpoint::kChatCompletions, "chatcmpl-1", 1700000000, "stories260K"};

TEST(OpenAiResponse, CompletionObject) {
  const Json j = response_json(kCompletion, " there was", "length", nullptr, result(5, 3));
  EXPECT_EQ(j, Json::parse(R"({"id": "cmpl-1", "object": "text_completion", "created": 1700000000,
      "model": "stories260K",
      "choices": [{"index": 0, "text": " there was", "logprobs": null, "finish_reason": "length"}],
      "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiResponse, ChatCompletionObject) {
  const Json j = response_json(kChat, "Hi!", "stop", nullptr, result(10, 2, FinishReason::kStop));
  EXPECT_EQ(j, Json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
      "model": "stories260K",
      "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "logprobs": null,
                   "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiResponse, Chunks) {
  EXPECT_EQ(chunk_json(kCompletion, "Once", false, "", nullptr, false),
            Json::parse(R"({"id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "stories260K",
                "choices": [{"index": 0, "text": "Once", "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(chunk_json(kChat, "", true, "", nullptr, true),
            Json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "stories260K", "usage": null,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "logprobs": null,
                             "finish_reason": null}]})"));
  EXPECT_EQ(chunk_json(kChat, " x", false, "", nullptr, false)["choices"][0]["delta"], Json::parse(R"({"content": " x"})"));
  EXPECT_EQ(chunk_json(kChat, "", false, "length", nullptr, false)["choices"][0],
            Json::parse(R"({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "length"})"));
  EXPECT_EQ(usage_chunk_json(kChat, result(4, 6)),
            Json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": "stories260K", "choices": [],
                "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10,
                "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiResponse, LogprobShapes) {
  const std::vector<TokenLogprob> tokens = {{" the", -0.5f, {{" the", -0.5f}, {" a", -1.25f}}},
                                            {"\xC3", -2.0f, {{"\xC3", -2.0f}}}};
  const Json completion = logprobs_json(ApiEndpoint::kCompletions, tokens, 3);
  EXPECT_EQ(completion["tokens"], (Json{" the", "\xC3"}));
  EXPECT_EQ(completion["token_logprobs"], Json::parse("[-0.5, -2.0]"));
  EXPECT_EQ(completion["top_logprobs"][0], Json::parse(R"({" the": -0.5, " a": -1.25})"));
  EXPECT_EQ(completion["top_logprobs"][1].size(), 1u);
  EXPECT_EQ(completion["text_offset"], Json::parse("[3, 7]"));
  const Json chat = logprobs_json(ApiEndpoint::kChatCompletions, tokens, 0);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], " the");
  EXPECT_EQ(chat["content"][0]["logprob"], -0.5);
  EXPECT_EQ(chat["content"][0]["bytes"], Json::parse("[32, 116, 104, 101]"));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1], Json::parse(R"({"token": " a", "logprob": -1.25, "bytes": [32, 97]})"));
  EXPECT_EQ(chat["content"][1]["bytes"], Json::parse("[195]"));  // a partial character: exact in bytes
}

TEST(OpenAiResponse, DumpReplacesInvalidUtf8) {
  EXPECT_EQ(dump_json(Json{{"text", std::string("caf\xC3")}}), "{\"text\":\"caf\xEF\xBF\xBD\"}");
}

TEST(OpenAiResponse, SseFraming) {
  EXPECT_EQ(sse_event(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(SseReader, SplitsEventsAcrossArbitraryChunks) {
  const std::string stream = "data: {\"a\":1}\n\n: comment\r\nevent: x\r\ndata: line1\r\ndata:line2\r\n\r\ndata: [DONE]\n\n";
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    SseReader reader;
    std::vector<std::string> events = reader.feed(std::string_view(stream).substr(0, cut));
    for (auto& e : reader.feed(std::string_view(stream).substr(cut))) events.push_back(std::move(e));
    EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "line1\nline2", "[DONE]"})) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace peregrine

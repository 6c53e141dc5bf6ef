#include "peregrine/server/completion_output.h"

#include <gtest/gtest.h>

#include "peregrine/server/sse_reader.h"
#include "server_test_util.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

struct Fed {
  std::vector<Json> chunks;  // parsed SSE events before [DONE]
  bool done = false;         // [DONE] was the last event
  std::size_t stopped_at = 0;  // tokens consumed (add_token returned false at the last one)
};

OpenAiRequest request(ApiEndpoint endpoint, bool stream) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  r.stream = stream;
  return r;
}

/// Feeds `ids` as token events (logprob -i) and finishes with `reason`.
Fed feed(CompletionOutput& out, const std::vector<std::int32_t>& ids, FinishReason reason, std::int32_t top = 0) {
  Fed run;
  SseReader reader;
  std::vector<std::string> events = reader.feed(out.take_events());
  for (std::int32_t id : ids) {
    ++run.stopped_at;
    TokenEvent ev{id, -static_cast<float>(run.stopped_at), {}};
    for (std::int32_t k = 0; k < top; ++k) ev.top_logprobs.emplace_back(id + k, -static_cast<float>(k));
    const bool go_on = out.add_token(ev);
    for (auto& e : reader.feed(out.take_events())) events.push_back(std::move(e));
    if (!go_on) break;
  }
  RequestResult result;
  result.reason = reason;
  result.prompt_tokens = 4;
  result.completion_tokens = static_cast<std::int64_t>(run.stopped_at);
  if (reason == FinishReason::kError) result.error = unavailable("the engine is shutting down");
  out.finish(result);
  EXPECT_TRUE(out.finished());
  for (auto& e : reader.feed(out.take_events())) events.push_back(std::move(e));
  for (const auto& e : events) {
    EXPECT_FALSE(run.done) << "event after [DONE]";
    if (e == "[DONE]") {
      run.done = true;
    } else {
      run.chunks.push_back(Json::parse(e));
    }
  }
  return run;
}

std::string joined_text(const std::vector<Json>& chunks, ApiEndpoint endpoint) {
  std::string text;
  for (const auto& c : chunks) {
    if (c["choices"].empty()) continue;
    const Json& choice = c["choices"][0];
    if (endpoint == ApiEndpoint::kCompletions) {
      text += choice["text"].get<std::string>();
    } else if (choice["delta"].contains("content") && !choice["delta"]["content"].is_null()) {
      text += choice["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

const std::string kText = "Lily saw a big \xE2\x80\x9C" "caf\xC3\xA9\xE2\x80\x9D. She was happy.";

TEST(CompletionOutput, ChatStreamStartsWithRoleEndsWithFinishUsageAndDone) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const auto ids = tok->encode(kText, false);
  OpenAiRequest req = request(ApiEndpoint::kChatCompletions, true);
  req.include_usage = true;
  CompletionOutput out(req, {ApiEndpoint::kChatCompletions, "chatcmpl-x", 1, "m"}, *tok, -1);
  const Fed run = feed(out, ids, FinishReason::kLength);
  ASSERT_TRUE(run.done);
  ASSERT_GE(run.chunks.size(), 3u);
  EXPECT_EQ(run.chunks.front()["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": null})"));
  for (const auto& c : run.chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], "chatcmpl-x");
    EXPECT_TRUE(c.contains("usage"));
  }
  const Json& last_choice = run.chunks[run.chunks.size() - 2]["choices"][0];
  EXPECT_EQ(last_choice["finish_reason"], "length");
  EXPECT_EQ(run.chunks.back()["choices"], Json::array());
  EXPECT_EQ(run.chunks.back()["usage"], Json::parse(R"({"prompt_tokens": 4, "completion_tokens": )" +
                                                    std::to_string(ids.size()) + R"(, "total_tokens": )" +
                                                    std::to_string(ids.size() + 4) +
                                                    R"(, "prompt_tokens_details": {"cached_tokens": 0}})"));
  EXPECT_EQ(joined_text(run.chunks, ApiEndpoint::kChatCompletions), kText);
}

TEST(CompletionOutput, CompletionStreamEqualsTheNonStreamingText) {
  auto tok = test::gpt2_tokenizer();
  ASSERT_TRUE(tok);
  const auto ids = tok->encode(kText, false);
  CompletionOutput streamed(request(ApiEndpoint::kCompletions, true), {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
  const Fed run = feed(streamed, ids, FinishReason::kStop);
  ASSERT_TRUE(run.done);
  EXPECT_EQ(run.chunks.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(run.chunks.back().contains("usage"));

  CompletionOutput whole(request(ApiEndpoint::kCompletions, false), {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
  feed(whole, ids, FinishReason::kStop);
  EXPECT_EQ(whole.take_events(), "");
  const auto body = whole.response();
  ASSERT_TRUE(std::holds_alternative<Json>(body));
  const Json& j = std::get<Json>(body);
  EXPECT_EQ(j["choices"][0]["text"], kText);
  EXPECT_EQ(joined_text(run.chunks, ApiEndpoint::kCompletions), kText);
  EXPECT_EQ(j["usage"]["completion_tokens"], ids.size());
}

TEST(CompletionOutput, StopStringEndsTheRequestAndIsNotInTheText) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const auto ids = tok->encode(kText, false);
  OpenAiRequest req = request(ApiEndpoint::kChatCompletions, false);
  req.stop = {"She was"};
  CompletionOutput out(req, {ApiEndpoint::kChatCompletions, "c", 1, "m"}, *tok, -1);
  const Fed run = feed(out, ids, FinishReason::kStop);
  EXPECT_LT(run.stopped_at, ids.size());
  EXPECT_NE(tok->decode(std::span(ids).first(run.stopped_at)).find("She was"), std::string::npos);
  EXPECT_EQ(tok->decode(std::span(ids).first(run.stopped_at - 1)).find("She was"), std::string::npos);
  const Json j = std::get<Json>(out.response());
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Lily saw a big \xE2\x80\x9C" "caf\xC3\xA9\xE2\x80\x9D. ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "She was");  // vLLM's extension: which stop string
  req.stream = true;
  CompletionOutput streamed(req, {ApiEndpoint::kChatCompletions, "c", 1, "m"}, *tok, -1);
  const Fed chunks = feed(streamed, ids, FinishReason::kStop);
  ASSERT_GE(chunks.chunks.size(), 2u);
  EXPECT_EQ(chunks.chunks.back()["choices"][0]["stop_reason"], "She was");
  CompletionOutput eos(request(ApiEndpoint::kChatCompletions, false), {ApiEndpoint::kChatCompletions, "c", 1, "m"}, *tok, -1);
  feed(eos, ids, FinishReason::kStop);
  EXPECT_FALSE(std::get<Json>(eos.response())["choices"][0].contains("stop_reason"));  // EOS: none
}

TEST(CompletionOutput, LogprobsCoverEveryTokenInBothShapes) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const auto ids = tok->encode(kText, false);
  OpenAiRequest req = request(ApiEndpoint::kCompletions, false);
  req.top_logprobs = 2;
  CompletionOutput out(req, {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
  feed(out, ids, FinishReason::kLength, 2);
  const Json lp = std::get<Json>(out.response())["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset);
    EXPECT_FLOAT_EQ(lp["token_logprobs"][i].get<float>(), -static_cast<float>(i + 1));
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    offset += tok->decode_token(i == 0 ? -1 : ids[i - 1], ids[i]).size();
  }
  EXPECT_EQ(offset, kText.size());

  OpenAiRequest chat_req = request(ApiEndpoint::kChatCompletions, true);
  chat_req.top_logprobs = 2;
  CompletionOutput chat(chat_req, {ApiEndpoint::kChatCompletions, "c", 1, "m"}, *tok, -1);
  const Fed run = feed(chat, ids, FinishReason::kLength, 2);
  std::string bytes;
  std::size_t entries = 0;
  for (const auto& c : run.chunks) {
    if (c["choices"][0]["logprobs"].is_null()) continue;
    for (const auto& e : c["choices"][0]["logprobs"]["content"]) {
      for (const auto& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
      EXPECT_EQ(e["top_logprobs"].size(), 2u);
      ++entries;
    }
  }
  EXPECT_EQ(entries, ids.size());
  EXPECT_EQ(bytes, kText);  // the bytes arrays rebuild the text exactly, split characters included
}

// n = 2: the two choices' tokens interleaved as the engine's step loop reports them; each chunk
// carries its choice's index, the usage chunk (prompt once, completions summed) and [DONE] come
// once, after the second choice ends; the body has both choices.
TEST(CompletionOutput, ChoicesInterleaveAndEndTogether) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const auto a = tok->encode("Lily saw a cat.", false), b = tok->encode("Tom ran home to his mom.", false);
  for (const bool stream : {true, false}) {
    OpenAiRequest req = request(ApiEndpoint::kCompletions, stream);
    req.n = 2;
    req.include_usage = stream;
    CompletionOutput out(req, {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
    SseReader reader;
    std::vector<std::string> events;
    for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i < a.size()) out.add_token({a[i], 0.0f, {}}, 0);
      if (i < b.size()) out.add_token({b[i], 0.0f, {}}, 1);
      if (i + 1 == a.size()) {
        out.finish({FinishReason::kStop, Status::ok(), 3, static_cast<std::int64_t>(a.size())}, 0);
        EXPECT_FALSE(out.finished()) << "choice 1 is still running";
      }
      for (auto& e : reader.feed(out.take_events())) events.push_back(std::move(e));
    }
    out.finish({FinishReason::kLength, Status::ok(), 3, static_cast<std::int64_t>(b.size())}, 1);
    ASSERT_TRUE(out.finished());
    for (auto& e : reader.feed(out.take_events())) events.push_back(std::move(e));
    if (!stream) {
      const Json j = std::get<Json>(out.response());
      ASSERT_EQ(j["choices"].size(), 2u);
      EXPECT_EQ(j["choices"][0]["index"], 0);
      EXPECT_EQ(j["choices"][0]["text"], "Lily saw a cat.");
      EXPECT_EQ(j["choices"][1]["index"], 1);
      EXPECT_EQ(j["choices"][1]["text"], "Tom ran home to his mom.");
      EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
      EXPECT_EQ(j["usage"], Json({{"prompt_tokens", 3}, {"completion_tokens", a.size() + b.size()},
                                  {"total_tokens", 3 + a.size() + b.size()},
                                  {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
      continue;
    }
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    std::string texts[2];
    std::string finishes[2];
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
      ASSERT_NE(events[i], "[DONE]");
      const Json c = Json::parse(events[i]);
      if (c["choices"].empty()) {
        EXPECT_EQ(i + 2, events.size()) << "the usage chunk comes last";
        EXPECT_EQ(c["usage"]["completion_tokens"], a.size() + b.size());
        continue;
      }
      const int index = c["choices"][0]["index"].get<int>();
      texts[index] += c["choices"][0]["text"].get<std::string>();
      if (!c["choices"][0]["finish_reason"].is_null()) finishes[index] = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(texts[0], "Lily saw a cat.");
    EXPECT_EQ(texts[1], "Tom ran home to his mom.");
    EXPECT_EQ(finishes[0], "stop");
    EXPECT_EQ(finishes[1], "length");
  }
}

TEST(CompletionOutput, FailedRequestsEndInAnError) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const auto ids = tok->encode("Once upon", false);
  CompletionOutput streamed(request(ApiEndpoint::kCompletions, true), {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
  const Fed run = feed(streamed, ids, FinishReason::kError);
  ASSERT_TRUE(run.done);
  EXPECT_EQ(run.chunks.back()["error"]["type"], "server_error");
  EXPECT_EQ(run.chunks.back()["error"]["message"], "the engine is shutting down");

  CompletionOutput whole(request(ApiEndpoint::kCompletions, false), {ApiEndpoint::kCompletions, "c", 1, "m"}, *tok, -1);
  feed(whole, ids, FinishReason::kCancelled);
  const auto body = whole.response();
  ASSERT_TRUE(std::holds_alternative<ApiError>(body));
  EXPECT_EQ(std::get<ApiError>(body).http_status, 503);
}

}  // namespace
}  // namespace peregrine

// Anthropic Messages requests rewritten as OpenAI chat requests, chat.completion bodies and
// streams rewritten as Anthropic messages and events (server/anthropic_messages.h,
// server/anthropic_stream.h).
#include "peregrine/server/anthropic_messages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peregrine/server/anthropic_stream.h"
#include "peregrine/server/openai_request.h"

namespace peregrine {
namespace {

using Ordered = nlohmann::ordered_json;
using Json = nlohmann::json;

Ordered convert(std::string_view body, AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  auto out = anthropic_to_openai(Ordered::parse(body), endpoint);
  if (const ApiError* e = std::get_if<ApiError>(&out)) ADD_FAILURE() << e->message;
  return std::get_if<Ordered>(&out) != nullptr ? std::get<Ordered>(out) : Ordered();
}

ApiError error_of(std::string_view body, AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  auto out = anthropic_to_openai(Ordered::parse(body), endpoint);
  EXPECT_TRUE(std::holds_alternative<ApiError>(out)) << body;
  return std::holds_alternative<ApiError>(out) ? std::get<ApiError>(out) : ApiError{};
}

TEST(AnthropicMessages, SystemBlocksAndToolTurnsBecomeOpenAiMessages) {
  const Ordered chat = convert(R"({
    "model": "claude-sonnet", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 40, "stream": true, "metadata": {"user_id": "u"},
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema":
               {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Call the tool.", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "unit": "C"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "25 C"}]},
        {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}}]}]})");
  EXPECT_EQ(chat["messages"], Ordered::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "toolu_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"C\"}"}}],
     "reasoning_content": "Call the tool."},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "25 C"},
    {"role": "user", "content": "And tomorrow?"}])"));
  // The schema keeps its key order (city before unit): the order of the call's arguments.
  EXPECT_EQ(chat["tools"].dump(),
            R"([{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":)"
            R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}}}}}])");
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["stop"], Ordered::array({"END"}));
  EXPECT_EQ(chat["max_tokens"], 64);
  EXPECT_EQ(chat["top_k"], 40);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  // And the OpenAI parser takes the result as it is.
  RequestLimits limits;
  limits.context_len = 512;
  auto parsed = parse_openai_request(chat.dump(), ApiEndpoint::kChatCompletions, limits);
  ASSERT_TRUE(std::holds_alternative<OpenAiRequest>(parsed)) << std::get<ApiError>(parsed).message;
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).messages[2].reasoning_content, "Call the tool.");
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).tool_choice, ToolChoice::kRequired);
}

TEST(AnthropicMessages, ToolChoicesAndErrorResults) {
  const std::string tools = R"("tools": [{"name": "f", "input_schema": {"type": "object"}}], )";
  EXPECT_EQ(convert("{" + tools + R"("max_tokens": 1, "tool_choice": {"type": "tool", "name": "f"}, "messages": []})")["tool_choice"],
            Ordered::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ(convert("{" + tools + R"("max_tokens": 1, "tool_choice": {"type": "none"}, "messages": []})")["tool_choice"], "none");
  const Ordered chat = convert(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "t", "is_error": true, "content": "City not found"}]}]})");
  EXPECT_EQ(chat["messages"], Ordered::parse(R"([{"role": "tool", "tool_call_id": "t", "content": "Error: City not found"}])"));
}

TEST(AnthropicMessages, OutputFormatIsAJsonSchemaResponseFormat) {
  const Ordered chat = convert(R"({"max_tokens": 8, "messages": [], "output_config": {"effort": "low",
      "format": {"type": "json_schema", "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})");
  EXPECT_EQ(chat["response_format"].dump(),
            R"({"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object","properties":{"b":{},"a":{}}}}})");
  EXPECT_EQ(error_of(R"({"max_tokens": 8, "messages": [], "output_config": {"format": {"type": "xml"}}})").param,
            "output_config.format");
}

TEST(AnthropicMessages, CountTokensNeedsNoMaxTokensButMessagesDo) {
  EXPECT_FALSE(convert(R"({"messages": [{"role": "user", "content": "Hi"}]})", AnthropicEndpoint::kCountTokens).contains("max_tokens"));
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "Hi"}]})").param, "max_tokens");
}

TEST(AnthropicMessages, UnsupportedInputIsA400NamingTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"max_tokens": 8})", "messages", "required"},
      {R"({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role", "user"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "messages[0].content[0].type", "image input is not supported"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "web_search_tool_result"}]}]})",
       "messages[0].content[0].type", "not a supported content block"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})",
       "messages[0].content[0].type", "on a user turn"},
      {R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f"}]}]})",
       "messages[0].content[0]", "input"},
      {R"({"max_tokens": 8, "messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]})",
       "tools[0].type", "only custom tools"},
      {R"({"max_tokens": 8, "messages": [], "tool_choice": {"type": "sometimes"}})", "tool_choice", "auto"},
      {R"({"max_tokens": 8, "system": 5, "messages": []})", "system", "string"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
    const Json body = anthropic_error_json(e);
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["message"], e.message);
  }
  EXPECT_EQ(anthropic_error_json(ApiError{401, "authentication_error", "no key", "", ""})["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(ApiError{503, "server_error", "busy", "", ""})["error"]["type"], "overloaded_error");
}

TEST(AnthropicMessages, ChatCompletionBecomesAMessage) {
  const Json body = Json::parse(R"({"id": "chatcmpl-00ff", "object": "chat.completion", "model": "qwen",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Sure.",
      "reasoning_content": "Need weather.",
      "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}}],
    "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42, "prompt_tokens_details": {"cached_tokens": 16}}})");
  EXPECT_EQ(anthropic_message_json(body), Json::parse(R"({"id": "msg_00ff", "type": "message", "role": "assistant",
    "model": "qwen", "stop_reason": "tool_use", "stop_sequence": null,
    "content": [{"type": "thinking", "thinking": "Need weather.", "signature": ""},
                {"type": "text", "text": "Sure."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}],
    "usage": {"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 16, "cache_creation_input_tokens": 0}})"));
  Json empty = body;
  empty["choices"][0] = Json::parse(R"({"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": ""}})");
  const Json m = anthropic_message_json(empty);
  EXPECT_EQ(m["content"], Json::parse(R"([{"type": "text", "text": ""}])"));
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  Json stopped = body;
  stopped["choices"][0] = Json::parse(R"({"index": 0, "finish_reason": "stop", "stop_reason": "END", "message": {"role": "assistant", "content": "a"}})");
  const Json s = anthropic_message_json(stopped);
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
}

// Splits Anthropic SSE bytes into (event name, data) pairs, checking each names its data's type.
std::vector<Json> events_of(const std::string& sse) {
  std::vector<Json> out;
  std::size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const std::size_t nl = sse.find('\n', pos);
    const std::string name = sse.substr(pos + 7, nl - pos - 7);
    EXPECT_EQ(sse.compare(nl + 1, 6, "data: "), 0);
    const std::size_t end = sse.find("\n\n", nl);
    out.push_back(Json::parse(sse.substr(nl + 7, end - nl - 7)));
    EXPECT_EQ(out.back()["type"], name);
    pos = end + 2;
  }
  return out;
}

// One SSE event of `json` (written over several lines here; the server writes each on one line).
std::string sse(std::string json) {
  std::erase(json, '\n');
  return "data: " + json + "\n\n";
}

TEST(AnthropicStream, ThinkingTextAndToolUseBlocksInOrder) {
  AnthropicStream s("msg_1", "qwen", 21);
  std::string out = s.push(sse(R"({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]})"));
  out += s.push(sse(R"({"choices": [{"index": 0, "delta": {"reasoning_content": "Hmm"}, "finish_reason": null}]})") +
                sse(R"({"choices": [{"index": 0, "delta": {"content": "Let me"}, "finish_reason": null}]})"));
  out += s.push(sse(R"({"choices": [{"index": 0, "delta": {"content": " check."}, "finish_reason": null}]})"));
  out += s.push(sse(R"({"choices": [{"index": 0, "delta": {"tool_calls": [
      {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
      {"index": 1, "id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, "finish_reason": null}]})"));
  out += s.push(sse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})") +
                sse(R"({"choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30}})") + "data: [DONE]\n\n");
  const std::vector<Json> e = events_of(out);
  std::vector<std::string> types;
  for (const Json& j : e) types.push_back(j["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta", "content_block_stop",
                                             "message_delta", "message_stop"}));
  EXPECT_EQ(e[0]["message"]["usage"], Json::parse(R"({"input_tokens": 21, "output_tokens": 0})"));
  EXPECT_EQ(e[0]["message"]["content"], Json::array());
  EXPECT_EQ(e[1], Json::parse(R"({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})"));
  EXPECT_EQ(e[2]["delta"], Json::parse(R"({"type": "thinking_delta", "thinking": "Hmm"})"));
  EXPECT_EQ(e[4]["index"], 1);
  EXPECT_EQ(e[6]["delta"], Json::parse(R"({"type": "text_delta", "text": " check."})"));
  EXPECT_EQ(e[8]["content_block"], Json::parse(R"({"type": "tool_use", "id": "call_a", "name": "f", "input": {}})"));
  EXPECT_EQ(e[9]["delta"], Json::parse(R"({"type": "input_json_delta", "partial_json": "{\"x\":1}"})"));
  EXPECT_EQ(e[11]["index"], 3);
  EXPECT_EQ(e[14]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(e[14]["usage"]["output_tokens"], 9);
}

TEST(AnthropicStream, AFailureIsOneErrorEventAndNothingAfter) {
  AnthropicStream s("msg_1", "m", 3);
  const std::vector<Json> e = events_of(s.push(sse(R"({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]})") +
                                               sse(R"({"error": {"message": "the server is shutting down", "type": "server_error"}})") +
                                               "data: [DONE]\n\n"));
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[3], Json::parse(R"({"type": "error", "error": {"type": "api_error", "message": "the server is shutting down"}})"));
}

TEST(AnthropicStream, AStopStringEndsWithStopSequence) {
  AnthropicStream s("msg_1", "m", 3);
  std::string out = s.push(sse(R"({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]})"));
  out += s.push(sse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": "END"}]})") +
                sse(R"({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})"));
  std::size_t at = out.find("event: message_delta");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(out.find(R"("stop_reason":"stop_sequence","stop_sequence":"END")", at), std::string::npos) << out;
}

}  // namespace
}  // namespace peregrine

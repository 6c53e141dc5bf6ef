// Responses API requests rewritten as chat requests, chat.completion bodies and streams
// rewritten as response objects and events (server/responses_api.h, server/responses_stream.h).
#include "peregrine/server/responses_api.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peregrine/server/openai_request.h"
#include "peregrine/server/responses_stream.h"
#include "peregrine/server/sse_reader.h"

namespace peregrine {
namespace {

using Ordered = nlohmann::ordered_json;
using Json = nlohmann::json;

std::variant<Ordered, ApiError> convert(std::string_view body) { return responses_to_chat(Ordered::parse(body)); }

TEST(ResponsesApi, InputItemsBecomeChatMessages) {
  const auto out = convert(R"({"model": "gpt-4.1", "instructions": "Be brief.", "max_output_tokens": 50, "temperature": 0.2,
    "store": true, "reasoning": {"effort": "low"}, "stream": true, "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "strict": true,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in "}, {"type": "input_text", "text": "Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "25 C"},
      {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "19 C"}]}]})");
  ASSERT_TRUE(std::holds_alternative<Ordered>(out)) << std::get<ApiError>(out).message;
  const Ordered& chat = std::get<Ordered>(out);
  EXPECT_EQ(chat["messages"], Ordered::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "25 C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "19 C"}])"));
  EXPECT_EQ(chat["tools"].dump(), R"([{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":)"
                                  R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}}}}}])");
  EXPECT_EQ(chat["tool_choice"], Ordered::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(chat["max_tokens"], 50);
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  RequestLimits limits;
  limits.context_len = 512;
  limits.vocab_size = 1000;
  auto parsed = parse_openai_request(chat.dump(), ApiEndpoint::kChatCompletions, limits);
  ASSERT_TRUE(std::holds_alternative<OpenAiRequest>(parsed)) << std::get<ApiError>(parsed).message;
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).messages.size(), 6u);
}

TEST(ResponsesApi, AStringInputIsOneUserMessageAndTextFormatsAreResponseFormats) {
  const auto out = convert(R"({"input": "Hi", "text": {"format": {"type": "text"}}})");
  ASSERT_TRUE(std::holds_alternative<Ordered>(out));
  EXPECT_EQ(std::get<Ordered>(out), Ordered::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  const auto schema = convert(R"({"input": "Hi", "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}}})");
  EXPECT_EQ(std::get<Ordered>(schema)["response_format"],
            Ordered::parse(R"({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}})"));
  const auto object = convert(R"({"input": "Hi", "text": {"format": {"type": "json_object"}}})");
  EXPECT_EQ(std::get<Ordered>(object)["response_format"], Ordered::parse(R"({"type": "json_object"})"));
}

TEST(ResponsesApi, StatefulOrNonTextInputIsA400NamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input": "Hi", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "Hi", "conversation": "conv_1"})", "conversation"},
      {R"({"model": "m"})", "input"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type"},
      {R"({"input": [{"type": "web_search_call"}]})", "input[0].type"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})", "input[0].content[0].type"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})", "input[0]"},
      {R"({"input": "Hi", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "Hi", "tool_choice": {"type": "file_search"}})", "tool_choice"},
      {R"({"input": "Hi", "text": {"format": {"type": "xml"}}})", "text.format"},
  };
  for (const auto& [body, param] : cases) {
    const auto out = convert(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(out)) << body;
    EXPECT_EQ(std::get<ApiError>(out).http_status, 400) << body;
    EXPECT_EQ(std::get<ApiError>(out).param, param) << body << ": " << std::get<ApiError>(out).message;
  }
}

const Json kChat = Json::parse(R"({"id": "chatcmpl-00ab", "object": "chat.completion", "created": 1700000000, "model": "qwen",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Sure.",
    "reasoning_content": "Need it.",
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]}}],
  "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42, "prompt_tokens_details": {"cached_tokens": 16}}})");

TEST(ResponsesApi, AChatCompletionBecomesAResponseObject) {
  const Json r = responses_object(kChat, Ordered::parse(R"({"input": "x", "temperature": 0.5, "instructions": "I"})"));
  EXPECT_EQ(r["id"], "resp_00ab");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["incomplete_details"], nullptr);
  EXPECT_EQ(r["created_at"], 1700000000);
  EXPECT_EQ(r["temperature"], 0.5);
  EXPECT_EQ(r["instructions"], "I");
  EXPECT_EQ(r["output"], Json::parse(R"([
    {"type": "reasoning", "id": "rs_00ab", "summary": [], "content": [{"type": "reasoning_text", "text": "Need it."}]},
    {"type": "message", "id": "msg_00ab", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "Sure.", "annotations": []}]},
    {"type": "function_call", "id": "fc_00ab_0", "call_id": "call_1", "name": "f", "arguments": "{\"x\":1}", "status": "completed"}])"));
  EXPECT_EQ(r["usage"], Json::parse(R"({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 16}, "output_tokens": 12,
    "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 42})"));
  Json cut = kChat;
  cut["choices"][0] = Json::parse(R"({"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "abc"}})");
  const Json incomplete = responses_object(cut, Ordered::parse(R"({"input": "x"})"));
  EXPECT_EQ(incomplete["status"], "incomplete");
  EXPECT_EQ(incomplete["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(incomplete["output"].size(), 1u);
}

// One SSE event of `json` (written over several lines here; the server writes each on one line).
std::string sse(std::string json) {
  std::erase(json, '\n');
  return "data: " + json + "\n\n";
}

TEST(ResponsesStream, EventsBuildTheSameResponseAsTheBody) {
  ResponsesStream s("chatcmpl-00ab", "qwen", 1700000000, Ordered::parse(R"({"input": "x"})"));
  const std::string in = sse(R"({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]})") +
                         sse(R"({"choices": [{"index": 0, "delta": {"reasoning_content": "Need it."}, "finish_reason": null}]})") +
                         sse(R"({"choices": [{"index": 0, "delta": {"content": "Su"}, "finish_reason": null}]})") +
                         sse(R"({"choices": [{"index": 0, "delta": {"content": "re."}, "finish_reason": null}]})") +
                         sse(R"({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                 "function": {"name": "f", "arguments": "{\"x\":1}"}}]}, "finish_reason": null}]})") +
                         sse(R"({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})") +
                         sse(R"({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
                                 "prompt_tokens_details": {"cached_tokens": 16}}})") + "data: [DONE]\n\n";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 7) out += s.push(std::string_view(in).substr(i, 7));  // split anywhere
  SseReader reader;
  std::vector<Json> events;
  for (const std::string& d : reader.feed(out)) events.push_back(Json::parse(d));
  std::vector<std::string> types;
  for (std::size_t i = 0; i < events.size(); ++i) {
    types.push_back(events[i]["type"]);
    EXPECT_EQ(events[i]["sequence_number"], i);
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added", "response.reasoning_text.delta",
                       "response.reasoning_text.done", "response.output_item.done", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[0]["response"]["output"], Json::array());
  EXPECT_EQ(events[8]["item_id"], "msg_00ab");
  EXPECT_EQ(events[10]["text"], "Sure.");
  EXPECT_EQ(events[13]["item"]["arguments"], "");
  EXPECT_EQ(events[16]["item"]["arguments"], "{\"x\":1}");
  // The final object is the one the non-streaming body gives.
  EXPECT_EQ(events.back()["response"], responses_object(kChat, Ordered::parse(R"({"input": "x"})")));
}

}  // namespace
}  // namespace peregrine

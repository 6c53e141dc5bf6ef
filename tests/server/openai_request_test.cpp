#include "peregrine/server/openai_request.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

const RequestLimits kLimits{512, 1234, SpecParams{}, 1000};

OpenAiRequest parse_ok(std::string_view body, ApiEndpoint endpoint = ApiEndpoint::kCompletions) {
  auto r = parse_openai_request(body, endpoint, kLimits);
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " → " << e->message;
    return {};
  }
  return std::get<OpenAiRequest>(r);
}

ApiError parse_error(std::string_view body, ApiEndpoint endpoint = ApiEndpoint::kCompletions) {
  auto r = parse_openai_request(body, endpoint, kLimits);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(OpenAiRequest, CompletionDefaultsFollowOpenAi) {
  const OpenAiRequest r = parse_ok(R"({"prompt": "Once upon a time"})");
  EXPECT_EQ(r.prompt_text, "Once upon a time");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.sampling.repeat_penalty, 1.0f);
  EXPECT_EQ(r.sampling.seed, 1234u);
  EXPECT_EQ(r.top_logprobs, -1);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.sampling.validate());
}

TEST(OpenAiRequest, CompletionFields) {
  const OpenAiRequest r = parse_ok(R"({"model": "m", "prompt": [1, 403, 407], "max_tokens": 7, "temperature": 0,
      "top_p": 0.5, "top_k": 3, "min_p": 0.1, "seed": 42, "stop": ["\n", "The"], "n": 1, "logprobs": 2,
      "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true, "user": "x",
      "presence_penalty": 0, "frequency_penalty": null})");
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<std::int32_t>{1, 403, 407}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "The"}));
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "n": 16})").n, 16);
}

TEST(OpenAiRequest, PromptAsOneElementBatchAndStopAsString) {
  const OpenAiRequest r = parse_ok(R"({"prompt": ["Hello"], "stop": "END"})");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END"}));
}

TEST(OpenAiRequest, ChatFields) {
  const OpenAiRequest r = parse_ok(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
      "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3})",
                                   ApiEndpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FALSE(parse_ok(R"({"messages": [{"role": "user", "content": "x"}]})", ApiEndpoint::kChatCompletions).max_tokens);
  EXPECT_EQ(parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})",
                     ApiEndpoint::kChatCompletions)
                .top_logprobs,
            0);
}

TEST(OpenAiRequest, GrammarAndJsonObjectFormatParse) {
  EXPECT_EQ(parse_ok(R"({"prompt": "x"})").grammar, nullptr);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "response_format": {"type": "text"}})").grammar, nullptr);
  const OpenAiRequest g = parse_ok(R"({"prompt": "x", "grammar": "root ::= (\"yes\" | \"no\") \".\""})");
  ASSERT_NE(g.grammar, nullptr);
  EXPECT_EQ(g.grammar->alternatives(g.grammar->root()).size(), 1u);
  const OpenAiRequest j =
      parse_ok(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})",
               ApiEndpoint::kChatCompletions);
  ASSERT_NE(j.grammar, nullptr);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "response_format": {"type": "json_object"}})").grammar, j.grammar);  // parsed once
  // llama.cpp's extension: json_object with a schema follows the schema (the same grammar as json_schema's).
  const OpenAiRequest with = parse_ok(R"({"prompt": "x", "response_format": {"type": "json_object", "schema": {"const": "42"}}})");
  const OpenAiRequest as = parse_ok(R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"const": "42"}}}})");
  ASSERT_NE(with.grammar, nullptr);
  EXPECT_NE(with.grammar, j.grammar);
  EXPECT_EQ(with.grammar, as.grammar);  // one Grammar per distinct text
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "json_schema": {"const": "42"}})").grammar, as.grammar);  // llama.cpp's field
}

TEST(OpenAiRequest, HowTheChatPromptEnds) {
  const auto end = [](std::string_view body) { return parse_ok(body, ApiEndpoint::kChatCompletions).prompt_end; };
  const char* user = R"({"role": "user", "content": "Hi"})";
  const std::string prefill = std::string(R"({"messages": [)") + user + R"(, {"role": "assistant", "content": "Whill"}])";
  EXPECT_EQ(end(std::string(R"({"messages": [)") + user + "]}"), PromptEnd::kGenerationPrompt);
  EXPECT_EQ(end(prefill + "}"), PromptEnd::kContinueLastMessage);  // llama.cpp's assistant prefill
  EXPECT_EQ(end(prefill + R"(, "add_generation_prompt": true})"), PromptEnd::kGenerationPrompt);
  EXPECT_EQ(end(prefill + R"(, "add_generation_prompt": false})"), PromptEnd::kAfterLastMessage);
  EXPECT_EQ(end(prefill + R"(, "add_generation_prompt": false, "continue_final_message": true})"), PromptEnd::kContinueLastMessage);
  EXPECT_EQ(end(std::string(R"({"messages": [)") + user + R"(, {"role": "assistant", "content": ""}]})"), PromptEnd::kGenerationPrompt);
}

TEST(OpenAiRequest, ToolsToolChoiceAndToolMessages) {
  const OpenAiRequest r = parse_ok(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{\"c\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {"c": {"type": "integer"}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "w"}}, "parallel_tool_calls": false})",
                                   ApiEndpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_NE(r.grammar, nullptr);  // the forced call
  const OpenAiRequest none = parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "w"}}], "tool_choice": "none"})",
                                      ApiEndpoint::kChatCompletions);
  EXPECT_EQ(none.tool_choice, ToolChoice::kNone);
  EXPECT_EQ(none.grammar, nullptr);

  // A Mistral template's calls start with a control token no grammar emits: forcing one is a 400.
  const std::string_view required = R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "w"}}], "tool_choice": "required"})";
  RequestLimits mistral = kLimits;
  mistral.tool_format = ToolCallFormat::kMistral;
  auto refused = parse_openai_request(required, ApiEndpoint::kChatCompletions, mistral);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "tool_choice");
  mistral.tool_format = ToolCallFormat::kLlama3;
  auto llama3 = parse_openai_request(required, ApiEndpoint::kChatCompletions, mistral);
  ASSERT_TRUE(std::holds_alternative<OpenAiRequest>(llama3));
  EXPECT_NE(std::get<OpenAiRequest>(llama3).grammar, nullptr);
}

struct BadCase {
  const char* body;
  ApiEndpoint endpoint;
  const char* param;
};

TEST(OpenAiRequest, EveryInvalidFieldIs400NamingTheParam) {
  const auto kC = ApiEndpoint::kCompletions;
  const auto kChat = ApiEndpoint::kChatCompletions;
  const BadCase cases[] = {
      {R"({"prompt": "x",)", kC, ""},  // malformed JSON
      {R"([1, 2])", kC, ""},
      {R"({"prompt": "x", "prompt": "y"})", kC, ""},  // duplicate key
      {R"({"max_tokens": 5})", kC, "prompt"},
      {R"({"prompt": 5})", kC, "prompt"},
      {R"({"prompt": []})", kC, "prompt"},
      {R"({"prompt": [1, -2]})", kC, "prompt"},
      {R"({"prompt": ["a", "b"]})", kC, "prompt"},
      {R"({"prompt": "x", "model": 3})", kC, "model"},
      {R"({"prompt": "x", "max_tokens": "16"})", kC, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", kC, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 513})", kC, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1.5})", kC, "max_tokens"},
      {R"({"prompt": "x", "temperature": 5})", kC, "temperature"},
      {R"({"prompt": "x", "temperature": -0.1})", kC, "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", kC, "temperature"},
      {R"({"prompt": "x", "top_p": 0})", kC, "top_p"},
      {R"({"prompt": "x", "top_p": 1.01})", kC, "top_p"},
      {R"({"prompt": "x", "top_k": -1})", kC, "top_k"},
      {R"({"prompt": "x", "min_p": 2})", kC, "min_p"},
      {R"({"prompt": "x", "seed": "a"})", kC, "seed"},
      {R"({"prompt": "x", "n": 0})", kC, "n"},
      {R"({"prompt": "x", "n": 17})", kC, "n"},
      {R"({"prompt": "x", "n": 2.5})", kC, "n"},
      {R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", kC, "stop"},
      {R"({"prompt": "x", "stop": [1]})", kC, "stop"},
      {R"({"prompt": "x", "logprobs": 6})", kC, "logprobs"},
      {R"({"prompt": "x", "logprobs": true})", kC, "logprobs"},
      {R"({"prompt": "x", "stream": "yes"})", kC, "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", kC, "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})", kC, "stream_options.include_usage"},
      {R"({"prompt": "x", "ignore_eos": 1})", kC, "ignore_eos"},
      {R"({"prompt": "x", "presence_penalty": 2.5})", kC, "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": -3})", kC, "frequency_penalty"},
      {R"({"prompt": "x", "frequency_penalty": "high"})", kC, "frequency_penalty"},
      {R"({"prompt": "x", "repeat_penalty": 0})", kC, "repeat_penalty"},
      {R"({"prompt": "x", "repeat_last_n": -2})", kC, "repeat_last_n"},
      {R"({"prompt": "x", "logit_bias": 3})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"hello": 1}})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"12x": 1}})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"1000": 1}})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"-1": 1}})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", kC, "logit_bias"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "add_generation_prompt": true,
           "continue_final_message": true})", kChat, "continue_final_message"},
      {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})", kChat, "continue_final_message"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": "no"})", kChat, "add_generation_prompt"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": 3})", kChat, "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", kChat, "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "maybe"})", kChat, "tool_choice"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", kChat, "messages[0].tool_call_id"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]})", kChat, "messages[0].tool_calls[0]"},
      {R"({"prompt": "x", "grammar": "root ::= [a-"})", kC, "grammar"},
      {R"({"prompt": "x", "grammar": "root ::= item"})", kC, "grammar"},
      {R"({"prompt": "x", "grammar": 7})", kC, "grammar"},
      {R"({"prompt": "x", "response_format": "json"})", kC, "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "xml"}})", kC, "response_format.type"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {}}})", kC, "response_format.json_schema.schema"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"allOf": []}}}})", kC, "response_format.json_schema.schema"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": 3}})", kC, "response_format.json_schema"},
      {R"({"prompt": "x", "response_format": {"type": "json_object", "schema": 123}})", kC, "response_format.schema"},
      {R"({"prompt": "x", "json_schema": {"type": "hiccup"}})", kC, "json_schema"},
      {R"({"prompt": "x", "json_schema": {}, "response_format": {"type": "json_object"}})", kC, "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "json_object", "schema": {"type": "hiccup"}}})", kC, "response_format.schema"},
      {R"({"prompt": "x", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})", kC, "response_format"},
      {R"({"prompt": "x", "logit_bias": {"5": "up"}})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": [[5]]})", kC, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": [[5, 1, 2]]})", kC, "logit_bias"},
      {R"({"prompt": "x"})", kChat, "messages"},
      {R"({"messages": {}})", kChat, "messages"},
      {R"({"messages": []})", kChat, "messages"},
      {R"({"messages": ["hi"]})", kChat, "messages[0]"},
      {R"({"messages": [{"content": "hi"}]})", kChat, "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "hi"}]})", kChat,
       "messages[1].role"},
      {R"({"messages": [{"role": "user"}]})", kChat, "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", kChat, "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", kChat, "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", kChat, "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})", kChat,
       "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})", kChat,
       "max_completion_tokens"},
      {R"({"prompt": "x", "speculative": "eagle3"})", kC, "speculative"},
      {R"({"prompt": "x", "speculative": 3})", kC, "speculative"},
      {R"({"prompt": "x", "speculative": {"method": 1}})", kC, "speculative.method"},
      {R"({"prompt": "x", "speculative": {"method": "pld", "draft_max": 0}})", kC, "speculative.draft_max"},
      {R"({"prompt": "x", "speculative": {"method": "pld", "draft_max": 65}})", kC, "speculative.draft_max"},
      {R"({"prompt": "x", "speculative": {"adaptive": "yes"}})", kC, "speculative.adaptive"},
      {R"({"prompt": "x", "speculative": {"draft_max": 2, "branching": 3}})", kC, "speculative"},
  };
  for (const auto& c : cases) {
    const ApiError e = parse_error(c.body, c.endpoint);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty()) << c.body;
    if (*c.param != '\0') {
      EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
    }
  }
}

// The penalties and logit_bias reach the sampler (OpenAI's object form with string token ids,
// llama.cpp's array of pairs); absent, they are off.
TEST(OpenAiRequest, PenaltiesAndLogitBias) {
  const OpenAiRequest off = parse_ok(R"({"prompt": "x"})");
  EXPECT_FALSE(off.sampling.penalizes());
  EXPECT_TRUE(off.sampling.logit_bias.empty());
  const OpenAiRequest r = parse_ok(R"({"prompt": "x", "presence_penalty": 0.5, "frequency_penalty": -1.25,
      "repeat_penalty": 1.1, "repeat_last_n": -1, "logit_bias": {"7": -100, "999": 2.5}})");
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -1.25f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(r.sampling.repeat_last_n, -1);
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{7, -100.0f}, {999, 2.5f}}));
  EXPECT_TRUE(r.sampling.validate());
  const OpenAiRequest pairs = parse_ok(R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": [[3, 1], [4, -0.5]]})",
                                       ApiEndpoint::kChatCompletions);
  EXPECT_EQ(pairs.sampling.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{3, 1.0f}, {4, -0.5f}}));
}

TEST(OpenAiRequest, SpeculativeFieldOverridesTheServerDefault) {
  EXPECT_EQ(parse_ok(R"({"prompt": "x"})").spec.method, SpecMethod::kNone);
  EXPECT_EQ(parse_ok(R"({"prompt": "x", "speculative": "pld"})").spec.method, SpecMethod::kPld);
  const OpenAiRequest r =
      parse_ok(R"({"prompt": "x", "speculative": {"method": "layerskip", "draft_max": 8, "branching": 2, "adaptive": true}})");
  EXPECT_EQ(r.spec.method, SpecMethod::kLayerSkip);
  EXPECT_EQ(r.spec.draft_max, 8);
  EXPECT_EQ(r.spec.branching, 2);
  EXPECT_TRUE(r.spec.adaptive);
  const RequestLimits server_default{512, 1, SpecParams{SpecMethod::kPld, 6, 1, false}};
  auto parsed = parse_openai_request(R"({"prompt": "x", "speculative": {"draft_max": 3}})", ApiEndpoint::kCompletions,
                                     server_default);
  ASSERT_TRUE(std::holds_alternative<OpenAiRequest>(parsed));
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).spec.method, SpecMethod::kPld);
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).spec.draft_max, 3);
  parsed = parse_openai_request(R"({"prompt": "x", "speculative": "none"})", ApiEndpoint::kCompletions, server_default);
  EXPECT_EQ(std::get<OpenAiRequest>(parsed).spec.method, SpecMethod::kNone);
}

TEST(OpenAiRequest, DeeplyNestedBodyIsRejectedNotRecursedInto) {
  std::string body = "{\"prompt\": ";
  body.append(100000, '[').append(100000, ']').append("}");
  EXPECT_EQ(parse_error(body).http_status, 400);
}

}  // namespace
}  // namespace peregrine

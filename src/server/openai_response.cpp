#include "peregrine/server/openai_response.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

const char* object_name(ApiEndpoint e, bool chunk) {
  if (e == ApiEndpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

Json header(const ResponseMeta& meta, bool chunk) {
  return {{"id", meta.id}, {"object", object_name(meta.endpoint, chunk)}, {"created", meta.created}, {"model", meta.model}};
}

// OpenAI's tool_calls entries (in a stream each also carries its "index").
Json tool_calls_json(std::span<const ToolCall> calls, std::size_t first_index, bool indexed) {
  Json out = Json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    Json c = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = first_index + i;
    out.push_back(std::move(c));
  }
  return out;
}

Json finish_json(std::string_view reason) { return reason.empty() ? Json(nullptr) : Json(std::string(reason)); }

Json bytes_json(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json chat_token_json(const std::string& token, float logprob) {
  return {{"token", token}, {"logprob", logprob}, {"bytes", bytes_json(token)}};
}

Json completion_logprobs(std::span<const TokenLogprob> tokens, std::size_t offset) {
  Json j = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
            {"text_offset", Json::array()}};
  for (const auto& t : tokens) {
    j["tokens"].push_back(t.token);
    j["token_logprobs"].push_back(t.logprob);
    Json top = Json::object();
    for (const auto& [text, lp] : t.top) top[text] = lp;
    j["top_logprobs"].push_back(std::move(top));
    j["text_offset"].push_back(offset);
    offset += t.token.size();
  }
  return j;
}

Json chat_logprobs(std::span<const TokenLogprob> tokens) {
  Json content = Json::array();
  for (const auto& t : tokens) {
    Json entry = chat_token_json(t.token, t.logprob);
    entry["top_logprobs"] = Json::array();
    for (const auto& [text, lp] : t.top) entry["top_logprobs"].push_back(chat_token_json(text, lp));
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

}  // namespace

Json usage_json(const RequestResult& result) {
  return {{"prompt_tokens", result.prompt_tokens},
          {"completion_tokens", result.completion_tokens},
          {"total_tokens", result.prompt_tokens + result.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", result.cached_prompt_tokens}}}};
}

Json logprobs_json(ApiEndpoint endpoint, std::span<const TokenLogprob> tokens, std::size_t first_offset) {
  return endpoint == ApiEndpoint::kCompletions ? completion_logprobs(tokens, first_offset) : chat_logprobs(tokens);
}

Json response_json(const ResponseMeta& meta, const std::string& text, std::string_view finish_reason,
                   const Json& logprobs, const RequestResult& result, std::span<const ToolCall> calls,
                   const std::string& reasoning) {
  Json choice = {{"index", meta.choice}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish_reason)}};
  if (meta.endpoint == ApiEndpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? Json(nullptr) : Json(text)}};
    if (!calls.empty()) choice["message"]["tool_calls"] = tool_calls_json(calls, 0, false);
    if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
  }
  Json j = header(meta, false);
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = usage_json(result);
  return j;
}

Json chunk_json(const ResponseMeta& meta, const std::string& text, bool first, std::string_view finish_reason,
                const Json& logprobs, bool with_usage_field) {
  Json choice = {{"index", meta.choice}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish_reason)}};
  if (meta.endpoint == ApiEndpoint::kCompletions) {
    choice["text"] = text;
  } else {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty()) {
      delta["content"] = text;
    } else if (first) {
      delta["content"] = nullptr;  // the role chunk, as llama-server sends it (OpenAI's has "")
    }
    choice["delta"] = std::move(delta);
  }
  Json j = header(meta, true);
  j["choices"] = Json::array({std::move(choice)});
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

// A chat chunk of one choice with `delta`.
Json delta_chunk_json(const ResponseMeta& meta, Json delta, bool with_usage_field) {
  Json choice = {{"index", meta.choice}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"delta", std::move(delta)}};
  Json j = header(meta, true);
  j["choices"] = Json::array({std::move(choice)});
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

Json tool_call_chunk_json(const ResponseMeta& meta, std::span<const ToolCall> calls, std::size_t first_index,
                          bool with_usage_field) {
  return delta_chunk_json(meta, {{"tool_calls", tool_calls_json(calls, first_index, true)}}, with_usage_field);
}

Json reasoning_chunk_json(const ResponseMeta& meta, const std::string& text, bool with_usage_field) {
  return delta_chunk_json(meta, {{"reasoning_content", text}}, with_usage_field);
}

Json usage_chunk_json(const ResponseMeta& meta, const RequestResult& result) {
  Json j = header(meta, true);
  j["choices"] = Json::array();
  j["usage"] = usage_json(result);
  return j;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace peregrine

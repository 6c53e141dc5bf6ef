// OpenAI response bodies: text_completion / chat.completion objects, their streaming chunks
// (Server-Sent Events, `data: {json}\n\n` ... `data: [DONE]\n\n`), usage and logprobs
// (https://platform.openai.com/docs/api-reference/completions/object,
//  https://platform.openai.com/docs/api-reference/chat/object,
//  https://platform.openai.com/docs/api-reference/chat/streaming,
//  https://html.spec.whatwg.org/multipage/server-sent-events.html).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/engine/request.h"
#include "peregrine/server/openai_request.h"
#include "peregrine/server/tool_calls.h"

namespace peregrine {

/// What every response and chunk of one request repeats.
struct ResponseMeta {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string id;            // "cmpl-..." / "chatcmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
  std::int32_t choice = 0;   // the index of the choice a body or chunk carries (n > 1)
};

/// One generated token's log-probability record, decoded to text.
struct TokenLogprob {
  std::string token;  // the bytes it added to the output (may be part of a UTF-8 character)
  float logprob = 0;  // natural log
  std::vector<std::pair<std::string, float>> top;  // alternatives, most likely first
};

/// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
/// (cached: the prompt tokens served from the prefix cache, not computed again).
nlohmann::json usage_json(const RequestResult& result);

/// Completions: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}
/// with offsets counted in bytes of the output text from `first_offset`. Chat: {"content":
/// [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
nlohmann::json logprobs_json(ApiEndpoint endpoint, std::span<const TokenLogprob> tokens, std::size_t first_offset);

/// The non-streaming body: choices[0] = {index meta.choice, text | message {role assistant, content},
/// logprobs (null when `logprobs` is null), finish_reason}, plus usage. With `calls` the
/// message has "tool_calls" (and content null when `text` is empty); with `reasoning`,
/// "reasoning_content".
nlohmann::json response_json(const ResponseMeta& meta, const std::string& text, std::string_view finish_reason,
                             const nlohmann::json& logprobs, const RequestResult& result,
                             std::span<const ToolCall> calls = {}, const std::string& reasoning = {});

/// A chat chunk whose delta carries reasoning text: {"reasoning_content": text}.
nlohmann::json reasoning_chunk_json(const ResponseMeta& meta, const std::string& text, bool with_usage_field);

/// A chat chunk whose delta carries `calls` as OpenAI's tool-call deltas, each whole:
/// {"index": first_index + i, "id", "type": "function", "function": {"name", "arguments"}}.
nlohmann::json tool_call_chunk_json(const ResponseMeta& meta, std::span<const ToolCall> calls, std::size_t first_index,
                                    bool with_usage_field);

/// One streaming chunk with one choice: completions {"text"}, chat {"delta": {"content"}} (plus
/// "role": "assistant" when `first`, content null when it has no text); finish_reason null when empty; "usage": null when
/// `with_usage_field` (stream_options.include_usage asks every chunk to carry the key).
nlohmann::json chunk_json(const ResponseMeta& meta, const std::string& text, bool first, std::string_view finish_reason,
                          const nlohmann::json& logprobs, bool with_usage_field);

/// The last chunk of stream_options.include_usage: "choices": [] and the usage.
nlohmann::json usage_chunk_json(const ResponseMeta& meta, const RequestResult& result);

/// Serializes compactly; invalid UTF-8 (a character cut by max_tokens) becomes U+FFFD.
std::string dump_json(const nlohmann::json& j);

/// "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
/// The stream terminator "data: [DONE]\n\n".
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace peregrine

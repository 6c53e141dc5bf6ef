// Anthropic's Messages API (https://docs.anthropic.com/en/api/messages,
// https://docs.anthropic.com/en/api/messages-count-tokens, https://docs.anthropic.com/en/api/errors)
// served through the OpenAI chat path: a request body is rewritten as an OpenAI chat request
// (then parsed and run as one), and the chat.completion body that comes back is rewritten as an
// Anthropic message. Streaming: server/anthropic_stream.h.
//
// Request fields: model, max_tokens (required; not for count_tokens), system (a string or text
// blocks), messages (role user / assistant; content a string or blocks: text, tool_use on an
// assistant turn, tool_result on a user turn, thinking / redacted_thinking on an assistant
// turn), tools (custom tools: name, description, input_schema), tool_choice (auto, any, tool,
// none; disable_parallel_tool_use), stop_sequences, output_config.format (a JSON schema the reply
// follows: structured outputs), stream, and temperature, top_p, top_k (sent by older clients);
// thinking, metadata, service_tier, output_config.effort and cache_control are accepted and have
// no effect. An image or document block, a server tool, or an unknown block type is a 400
// naming it.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "peregrine/server/api_error.h"

namespace peregrine {

/// Which Anthropic endpoint a body is for: count_tokens needs no max_tokens.
enum class AnthropicEndpoint { kMessages, kCountTokens };

/// The OpenAI chat request body equivalent to an Anthropic Messages request `body`: the system
/// prompt as a leading system message; text blocks joined into a message's content; an
/// assistant's tool_use blocks as its tool_calls and thinking blocks as its reasoning_content; a
/// user turn's tool_result blocks as "tool" messages (before its text, which follows as a user
/// message); tools as function tools; tool_choice any → "required", tool → the named function;
/// streaming with usage. Errors: a 400 invalid_request_error whose param is the Anthropic field
/// at fault (messages[i].content[j].type for an unsupported block). Ordered JSON: schemas keep
/// their key order (the order of a tool call's arguments).
std::variant<nlohmann::ordered_json, ApiError> anthropic_to_openai(const nlohmann::ordered_json& body,
                                                              AnthropicEndpoint endpoint);

/// The Anthropic message for a non-streaming OpenAI chat.completion `body`: {"id": "msg_...",
/// "type": "message", "role": "assistant", "model", "content": [thinking?, text?, tool_use*]
/// (one empty text block when the reply is empty), "stop_reason" (end_turn, max_tokens,
/// tool_use, or stop_sequence with "stop_sequence" the string when the choice's stop_reason names
/// one), "usage": {"input_tokens", "output_tokens",
/// "cache_read_input_tokens", "cache_creation_input_tokens": 0}}.
nlohmann::json anthropic_message_json(const nlohmann::json& body);

/// The message id for an OpenAI response id: "chatcmpl-XXXX" → "msg_XXXX".
std::string anthropic_message_id(std::string_view openai_id);

/// Anthropic's stop_reason for an OpenAI finish_reason: stop → end_turn, length → max_tokens,
/// tool_calls → tool_use.
std::string anthropic_stop_reason(const std::string& finish_reason);

/// Anthropic's error body {"type": "error", "error": {"type", "message"}} for `e` (type by HTTP
/// status: 400 invalid_request_error, 401 authentication_error, 404 not_found_error, 413
/// request_too_large, 429 rate_limit_error, 503 overloaded_error, else api_error), its message
/// (which names the field at fault).
nlohmann::json anthropic_error_json(const ApiError& e);

}  // namespace peregrine

// OpenAI's Responses API (https://platform.openai.com/docs/api-reference/responses/create), the
// stateless part, served through the chat path: a request is rewritten as an OpenAI chat request
// (then parsed and run as one), the chat.completion that comes back as a response object.
// Streaming: server/responses_stream.h.
//
// Request fields: model, input (a string, or items: messages with role user / system /
// developer / assistant and content a string or input_text / output_text parts;
// function_call and function_call_output items; reasoning items are accepted and dropped),
// instructions, max_output_tokens, temperature, top_p, tools (function tools), tool_choice,
// parallel_tool_calls, text.format (text, json_object, json_schema), stream; store, metadata,
// user, reasoning, truncation and service_tier have no effect. The server keeps no responses:
// previous_response_id, item references and conversation ids are a 400, as are image / file
// inputs and tools other than functions.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "peregrine/server/api_error.h"

namespace peregrine {

/// The OpenAI chat request body equivalent to a Responses request `body` (ordered: schemas keep
/// their key order): instructions as a leading system message, developer messages as system
/// ones, function_call items as an assistant message's tool_calls (consecutive calls, and an
/// assistant message just before them, in one message), function_call_output items as "tool"
/// messages; max_output_tokens as max_tokens; function tools in chat form; text.format as
/// response_format; streaming with usage. Errors: a 400 invalid_request_error naming the field
/// (input[i].type for an unsupported item).
std::variant<nlohmann::ordered_json, ApiError> responses_to_chat(const nlohmann::ordered_json& body);

/// The response id for an OpenAI chat id: "chatcmpl-XXXX" → "resp_XXXX".
std::string response_id(std::string_view chat_id);

/// The response object for a finished chat.completion `chat` of the Responses request
/// `request`: {"id": "resp_...", "object": "response", "created_at", "status" ("completed", or
/// "incomplete" with incomplete_details.reason "max_output_tokens"), "model", "output": [a
/// reasoning item (rs_...) when there was reasoning, a message item (msg_...) with one
/// output_text part when there was text, a function_call item (fc_...) per call], "usage":
/// {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
/// "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens"}, "error": null}, echoing the
/// request's instructions, max_output_tokens, temperature, top_p, tools, tool_choice,
/// parallel_tool_calls and text.
nlohmann::json responses_object(const nlohmann::json& chat, const nlohmann::ordered_json& request);

}  // namespace peregrine

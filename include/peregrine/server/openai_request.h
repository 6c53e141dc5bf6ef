// The body of an OpenAI completions / chat completions request, parsed and validated
// (https://platform.openai.com/docs/api-reference/completions/create,
//  https://platform.openai.com/docs/api-reference/chat/create).
//
// Accepted fields: model, prompt (completions: a string or an array of token ids; one prompt),
// messages (chat: role system/user/assistant, content a string or an array of text parts),
// max_tokens (chat also max_completion_tokens), temperature [0, 2] (default 1, as OpenAI),
// top_p (0, 1] (default 1), seed, stop (a string or up to 4 strings), n (only 1), stream,
// stream_options.include_usage, logprobs (completions: integer 0..5; chat: boolean with
// top_logprobs 0..20), presence_penalty / frequency_penalty [-2, 2] (default 0), logit_bias
// (an object {"token id": bias in [-100, 100]}, or llama.cpp's array of [id, bias] pairs), and
// the extensions top_k (>= 0, default 0 = off), min_p [0, 1] (default 0), llama.cpp's
// repeat_penalty (> 0, default 1 = off) and repeat_last_n (>= -1, default 64: the window of
// all three penalties, -1 the whole context), ignore_eos and
// speculative (a method name "none" | "pld" | "draft" | "layerskip" | "quant", or an object
// {"method", "draft_max" 1..64, "branching" >= 1, "adaptive"}; absent: the server's default);
// chat: vLLM's add_generation_prompt and continue_final_message, and llama.cpp's assistant
// prefill (a last assistant message with content and no tool calls is continued unless
// add_generation_prompt is given).
// Other fields (user, ...) are ignored, as OpenAI-compatible servers commonly do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "peregrine/sampling/grammar.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/spec_params.h"
#include "peregrine/server/api_error.h"
#include "peregrine/server/tool_calls.h"
#include "peregrine/tokenizer/chat_prompt.h"
#include "peregrine/tokenizer/chat_template.h"

namespace peregrine {

enum class ApiEndpoint { kCompletions, kChatCompletions };

/// OpenAI's tool_choice: "auto" (the model decides), "none" (no call: the tools are not shown),
/// "required" (at least one call, forced by a grammar), or one named function (forced).
enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

/// A validated request, not yet tokenized.
/// The most choices ("n") one request may ask for.
inline constexpr std::int32_t kMaxChoices = 16;

struct OpenAiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;                        // "" when absent
  std::string prompt_text;                  // completions with a string prompt
  std::vector<std::int32_t> prompt_tokens;  // completions with a token-id prompt
  bool prompt_is_tokens = false;
  std::vector<ChatMessage> messages;        // chat
  PromptEnd prompt_end = PromptEnd::kGenerationPrompt;  // chat: a new turn, none, or the last (assistant) message continued
  std::optional<std::int32_t> max_tokens;   // absent: completions 16, chat the rest of the context
  SamplingParams sampling;                  // OpenAI defaults, repetition penalty off
  std::int32_t top_logprobs = -1;           // -1: no logprobs, else alternatives per token
  bool ignore_eos = false;
  std::vector<std::string> stop;            // non-empty strings
  std::int32_t n = 1;                       // choices, 1..kMaxChoices (the i-th samples with seed + i)
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  SpecParams spec;                          // speculative decoding of this request
  nlohmann::ordered_json tools;             // chat: OpenAI's tools list (null: none)
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;             // kNamed: the function
  bool parallel_tool_calls = true;
  /// "grammar", "json_schema" or response_format json_object / json_schema (null: none); the
  /// same object for the same grammar text among the last 32 requests' (so the server shares its
  /// masks).
  std::shared_ptr<const Grammar> grammar;
};

/// What the parser needs to know about the server.
struct RequestLimits {
  std::int64_t context_len = 0;  // per-request context: max_tokens must not exceed it
  std::uint64_t seed = 0;        // used when the request has no seed
  SpecParams spec;               // used when the request has no "speculative" field
  std::int64_t vocab_size = 0;   // logit_bias token ids must be below it
  ToolCallFormat tool_format = ToolCallFormat::kHermes;  // the chat template's: a forced call's grammar
  float temperature = 1.0f;      // used when the request has no temperature (serve --temp)
  std::optional<std::int32_t> max_tokens = std::nullopt;  // used when the request has none (serve --n-predict)
};

/// Parses and validates a JSON body. Errors: an ApiError 400 invalid_request_error whose param
/// names the field at fault: "" for malformed JSON or a non-object body; the field for a wrong
/// type, a missing prompt / messages, empty messages (messages[i].role for an unknown role),
/// max_tokens outside [1, context_len], temperature outside [0, 2], top_p outside (0, 1],
/// top_k < 0, min_p outside [0, 1], presence / frequency penalty outside [-2, 2], repeat_penalty
/// <= 0, repeat_last_n < -1, a logit_bias key that is not a token id below vocab_size or a bias
/// outside [-100, 100], n outside [1, kMaxChoices], more than 4 stop strings, logprobs out of range, stream_options
/// without stream, a "grammar" that does not parse (its line and column), a response_format
/// other than text / json_object / json_schema, a JSON schema outside the supported subset
/// (sampling/json_schema_grammar.h: param response_format.json_schema.schema, the message naming
/// the keyword), or both a grammar and a response_format.
std::variant<OpenAiRequest, ApiError> parse_openai_request(std::string_view body, ApiEndpoint endpoint,
                                                           const RequestLimits& limits);

}  // namespace peregrine

// The output side of one OpenAI request: the engine's token events in, response text out.
// Tokens go through a TextStream (UTF-8 holdback, stop strings) and, when logprobs were asked
// for, become TokenLogprob records; a streaming request turns them into SSE chunks as they
// come, a non-streaming one into one response body at the end.
//
// Not thread-safe: the engine's loop thread feeds it (add_token, finish) while the HTTP thread
// reads it (take_events, response); the caller serializes the two.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/engine/request.h"
#include "peregrine/server/api_error.h"
#include "peregrine/server/openai_request.h"
#include "peregrine/server/openai_response.h"
#include "peregrine/server/reasoning.h"
#include "peregrine/server/text_stream.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// How a chat reply is split: tool-call ids' seed, and where reasoning starts (server/reasoning.h).
struct OutputOptions {
  std::uint64_t call_seed = 0;
  ReasoningStart reasoning = ReasoningStart::kOff;
};

class CompletionOutput {
 public:
  /// `tokenizer` must outlive the output; `prev_token` is the last prompt token. A streaming
  /// chat request starts with the {"role": "assistant"} chunk already queued. A chat request
  /// with tools (tool_choice not "none") has its Hermes <tool_call> blocks parsed out of the
  /// text into tool_calls (streamed as tool-call deltas, finish_reason "tool_calls"), ids seeded
  /// by options.call_seed. A chat reply with options.reasoning on has its <think> block split
  /// into reasoning_content (before the tool calls are looked for).
  CompletionOutput(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer,
                   std::int32_t prev_token, OutputOptions options = {});

  /// Consumes one sampled token. Returns false when a stop string completed (the engine then
  /// stops the request: RequestCallbacks::on_token's contract).
  bool add_token(const TokenEvent& event);
  /// Ends the output with the engine's result. Streaming: queues the held-back text, the chunk
  /// with finish_reason ("stop" | "length"), the usage chunk when asked for, and [DONE]; a
  /// failed request (kError, kCancelled) queues an {"error": ...} event and [DONE] instead.
  void finish(const RequestResult& result);

  bool finished() const { return result_.has_value(); }
  /// Streaming: whether SSE bytes are queued.
  bool has_events() const { return !events_.empty(); }
  /// Streaming: the SSE bytes queued since the last call.
  std::string take_events();
  /// Non-streaming, after finish(): the response body, or the error of a failed request
  /// (api_error of its Status: 503 for shutdown / cancellation, 500 otherwise).
  std::variant<nlohmann::json, ApiError> response() const;

 private:
  TokenLogprob decode_logprobs(const TokenEvent& event) const;
  void release(std::string text, const nlohmann::json& logprobs);
  void release_content(std::string text, const nlohmann::json& logprobs);
  void emit(const std::string& text, const nlohmann::json& logprobs);
  void queue_chunk(const std::string& text, std::string_view finish_reason, const nlohmann::json& logprobs);
  std::optional<ApiError> failure() const;
  std::string_view finish_reason() const;

  ResponseMeta meta_;
  const Tokenizer& tokenizer_;
  TextStream stream_;
  bool streaming_;
  bool include_usage_;
  bool want_logprobs_;
  bool first_chunk_ = true;
  std::int32_t prev_;
  std::string text_;                   // released output text
  std::vector<TokenLogprob> logprobs_;  // every token's record (non-streaming)
  std::size_t logprob_offset_ = 0;      // text_offset of the next record
  std::string events_;                 // queued SSE bytes (streaming)
  std::optional<RequestResult> result_;
  std::optional<ReasoningParser> reasoning_parser_;  // chat with reasoning parsed
  std::string reasoning_;                            // reasoning text so far
  std::optional<ToolCallParser> tools_;  // chat with tools (not tool_choice none)
  std::vector<ToolCall> calls_;          // parsed so far
};

/// The OpenAI finish_reason of a finished request: "stop" or "length"; "" for cancelled or
/// failed requests (those end in an error instead).
std::string_view openai_finish_reason(FinishReason reason);

}  // namespace peregrine

// The output side of one OpenAI request: the engine's token events in, response text out, for
// each of its `n` choices (each its own engine request). Tokens go through a TextStream (UTF-8
// holdback, stop strings) and, when logprobs were asked for, become TokenLogprob records; a
// streaming request turns them into SSE chunks as they come (the choices' chunks interleaved,
// each with its index; one usage chunk and one [DONE] after the last choice ends), a
// non-streaming one into one response body at the end (every choice; usage summed).
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
  ToolCallFormat tool_format = ToolCallFormat::kHermes;  // the chat template's (server/tool_calls.h)
};

class CompletionOutput {
 public:
  /// `tokenizer` must outlive the output; `prev_token` is the last prompt token; request.n
  /// choices (choice i's chunks and body carry index i). A streaming chat request starts with
  /// each choice's {"role": "assistant"} chunk already queued. A chat request with tools
  /// (tool_choice not "none") has its calls (in options.tool_format) parsed out of the text into
  /// tool_calls (streamed as tool-call deltas, finish_reason "tool_calls"), ids seeded by
  /// options.call_seed + choice. A chat reply with options.reasoning on has its <think> block
  /// split into reasoning_content (before the tool calls are looked for).
  CompletionOutput(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer,
                   std::int32_t prev_token, OutputOptions options = {});

  /// Consumes one sampled token of `choice`. Returns false when a stop string completed (the
  /// engine then stops that choice's request: RequestCallbacks::on_token's contract).
  bool add_token(const TokenEvent& event, std::size_t choice = 0);
  /// Ends `choice` with the engine's result. Streaming: queues its held-back text and its chunk
  /// with finish_reason ("stop" | "length", and vLLM's "stop_reason": the stop string that ended
  /// it, when one did; the response body's choice carries it too); after the last choice, the usage chunk when asked
  /// for, and [DONE]. A failed choice (kError, kCancelled) queues an {"error": ...} event and
  /// [DONE] at once; nothing is queued after [DONE] (the caller cancels the other choices).
  void finish(const RequestResult& result, std::size_t choice = 0);

  /// The id, model and creation time every body and chunk carries.
  const ResponseMeta& meta() const { return choices_.front().meta; }
  /// Every choice ended, or one failed.
  bool finished() const { return n_finished_ == choices_.size() || failure().has_value(); }
  /// Streaming: whether SSE bytes are queued.
  bool has_events() const { return !events_.empty(); }
  /// Streaming: the SSE bytes queued since the last call.
  std::string take_events();
  /// Non-streaming, after finished(): the response body, or the error of a failed choice
  /// (api_error of its Status: 503 for shutdown / cancellation, 500 otherwise).
  std::variant<nlohmann::json, ApiError> response() const;

 private:
  // One choice's state.
  struct Choice {
    Choice(const OpenAiRequest& request, ResponseMeta meta, const Tokenizer& tokenizer, std::int32_t prev_token,
           OutputOptions options);
    ResponseMeta meta;  // meta.choice: its index
    TextStream stream;
    bool first_chunk = true;
    std::int32_t prev;
    std::string text;                   // released output text
    std::vector<TokenLogprob> logprobs;  // every token's record (non-streaming)
    std::size_t logprob_offset = 0;      // text_offset of the next record
    std::optional<RequestResult> result;
    std::optional<ReasoningParser> reasoning_parser;  // chat with reasoning parsed
    std::string reasoning;                            // reasoning text so far
    std::optional<ToolCallParser> tools;  // chat with tools (not tool_choice none)
    std::vector<ToolCall> calls;          // parsed so far
    std::optional<ApiError> failure() const;
    std::string_view finish_reason() const;
  };

  TokenLogprob decode_logprobs(const Choice& c, const TokenEvent& event) const;
  void release(Choice& c, std::string text, const nlohmann::json& logprobs);
  void release_content(Choice& c, std::string text, const nlohmann::json& logprobs);
  void emit(Choice& c, const std::string& text, const nlohmann::json& logprobs);
  void queue_chunk(Choice& c, const std::string& text, std::string_view finish_reason, const nlohmann::json& logprobs);
  std::optional<ApiError> failure() const;
  RequestResult usage() const;

  const Tokenizer& tokenizer_;
  bool streaming_;
  bool include_usage_;
  bool want_logprobs_;
  std::vector<Choice> choices_;
  std::size_t n_finished_ = 0;
  bool done_ = false;    // [DONE] queued
  std::string events_;  // queued SSE bytes (streaming)
};

/// The OpenAI finish_reason of a finished request: "stop" or "length"; "" for cancelled or
/// failed requests (those end in an error instead).
std::string_view openai_finish_reason(FinishReason reason);

}  // namespace peregrine

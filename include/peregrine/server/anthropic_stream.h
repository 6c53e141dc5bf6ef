// A streaming Anthropic Messages response made from the OpenAI chat stream of the same request
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming): the OpenAI SSE bytes
// CompletionOutput queues go in (chunks with delta.reasoning_content / content / tool_calls,
// the finish_reason chunk, the usage chunk, [DONE], or an {"error"} event), Anthropic's
// events come out, each as `event: TYPE\ndata: JSON\n\n`:
//   message_start (usage.input_tokens) · per content block content_block_start, its deltas
//   (thinking_delta, text_delta, or one input_json_delta with a tool call's whole arguments),
//   content_block_stop, blocks indexed 0, 1, ... in order · message_delta (stop_reason,
//   stop_sequence, usage.output_tokens) · message_stop; a failure: an `error` event instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "peregrine/server/sse_reader.h"

namespace peregrine {

class AnthropicStream {
 public:
  /// `id` and `model` of the message; `input_tokens`: the prompt's length.
  AnthropicStream(std::string id, std::string model, std::int64_t input_tokens);

  /// Converts OpenAI SSE bytes (events may be split anywhere; the first call also emits
  /// message_start). Returns the Anthropic SSE bytes.
  std::string push(std::string_view openai_sse);

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  void chunk(const nlohmann::json& c);
  void open(Block kind, const nlohmann::json& content_block);
  void close();
  void event(const nlohmann::json& e);

  std::string id_, model_;
  std::int64_t input_tokens_;
  bool started_ = false;
  bool failed_ = false;            // an error event went out: nothing follows it
  Block block_ = Block::kNone;
  int index_ = -1;                 // of the open (or last) block
  std::string stop_reason_ = "end_turn";
  nlohmann::json stop_sequence_;  // the stop string that ended the reply (null: none)
  SseReader reader_;
  std::string out_;
};

}  // namespace peregrine

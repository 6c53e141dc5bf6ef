// A streaming Responses API response made from the OpenAI chat stream of the same request
// (https://platform.openai.com/docs/api-reference/responses-streaming): CompletionOutput's SSE
// bytes go in, the Responses events come out as `event: TYPE\ndata: JSON\n\n`, each with its
// sequence_number:
//   response.created, response.in_progress · per output item response.output_item.added, then
//   a reasoning item's response.reasoning_text.delta / .done, a message's
//   response.content_part.added, response.output_text.delta / .done, response.content_part.done,
//   a function call's response.function_call_arguments.delta / .done, and
//   response.output_item.done · response.completed (or response.incomplete at max_output_tokens)
//   with the whole response object (server/responses_api.h); a failure: an `error` event.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "peregrine/server/sse_reader.h"

namespace peregrine {

class ResponsesStream {
 public:
  /// `chat_id`, `model`, `created`: the chat stream's; `request`: the Responses request (echoed
  /// in the response objects).
  ResponsesStream(std::string chat_id, std::string model, std::int64_t created, nlohmann::ordered_json request);

  /// Converts OpenAI SSE bytes (events may be split anywhere; the first call also emits
  /// response.created and response.in_progress). Returns the Responses SSE bytes.
  std::string push(std::string_view openai_sse);

 private:
  enum class Item { kNone, kReasoning, kMessage };
  void chunk(const nlohmann::json& c);
  void text(Item kind, const std::string& delta);
  void call(const nlohmann::json& call);
  void close();
  void event(std::string_view type, nlohmann::json e);
  nlohmann::json open_item(Item kind) const;
  nlohmann::json response(std::string_view status) const;

  nlohmann::ordered_json request_;
  nlohmann::json chat_;  // the chat.completion accumulated so far (responses_object's input)
  std::string suffix_;   // of the item ids
  std::int64_t sequence_ = 0;
  int output_index_ = -1;
  Item item_ = Item::kNone;
  std::string item_text_;  // the open item's text so far
  bool started_ = false;
  bool failed_ = false;
  SseReader reader_;
  std::string out_;
};

}  // namespace peregrine

#include "peregrine/server/anthropic_stream.h"

#include <utility>

#include "peregrine/server/anthropic_messages.h"
#include "peregrine/server/openai_response.h"

namespace peregrine {

using Json = nlohmann::json;

AnthropicStream::AnthropicStream(std::string id, std::string model, std::int64_t input_tokens)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

void AnthropicStream::event(const Json& e) {
  out_.append("event: ").append(e["type"].get<std::string>()).append("\ndata: ").append(dump_json(e)).append("\n\n");
}

void AnthropicStream::open(Block kind, const Json& content_block) {
  if (block_ == kind && kind != Block::kToolUse) return;
  close();
  block_ = kind;
  event({{"type", "content_block_start"}, {"index", ++index_}, {"content_block", content_block}});
}

void AnthropicStream::close() {
  if (block_ == Block::kNone) return;
  event({{"type", "content_block_stop"}, {"index", index_}});
  block_ = Block::kNone;
}

// One OpenAI chat chunk.
void AnthropicStream::chunk(const Json& c) {
  if (c.contains("error")) {
    const Json& e = c["error"];
    event({{"type", "error"}, {"error", {{"type", "api_error"}, {"message", e.value("message", "")}}}});
    failed_ = true;
    return;
  }
  if (c.contains("usage") && c["usage"].is_object()) {  // the last chunk: choices []
    close();
    event({{"type", "message_delta"},
           {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
           {"usage", {{"output_tokens", c["usage"]["completion_tokens"]}}}});
    return;
  }
  if (!c.contains("choices") || c["choices"].empty()) return;
  const Json& choice = c["choices"][0];
  const Json& delta = choice["delta"];
  if (const auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string() && !r->get<std::string>().empty()) {
    open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}});
    event({{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "thinking_delta"}, {"thinking", *r}}}});
  }
  if (const auto t = delta.find("content"); t != delta.end() && t->is_string() && !t->get<std::string>().empty()) {
    open(Block::kText, {{"type", "text"}, {"text", ""}});
    event({{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "text_delta"}, {"text", *t}}}});
  }
  if (const auto calls = delta.find("tool_calls"); calls != delta.end()) {
    for (const Json& call : *calls) {
      open(Block::kToolUse, {{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]}, {"input", Json::object()}});
      event({{"type", "content_block_delta"},
             {"index", index_},
             {"delta", {{"type", "input_json_delta"}, {"partial_json", call["function"]["arguments"]}}}});
    }
  }
  if (choice["finish_reason"].is_string()) stop_reason_ = anthropic_stop_reason(choice["finish_reason"].get<std::string>());
  if (const auto stop = choice.find("stop_reason"); stop != choice.end() && stop->is_string()) {
    stop_reason_ = "stop_sequence";
    stop_sequence_ = *stop;
  }
}

std::string AnthropicStream::push(std::string_view openai_sse) {
  if (!started_) {
    started_ = true;
    event({{"type", "message_start"},
           {"message",
            {{"id", id_},
             {"type", "message"},
             {"role", "assistant"},
             {"model", model_},
             {"content", Json::array()},
             {"stop_reason", nullptr},
             {"stop_sequence", nullptr},
             {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}}}});
  }
  for (const std::string& data : reader_.feed(openai_sse)) {
    if (failed_) break;
    if (data == "[DONE]") {
      close();
      event({{"type", "message_stop"}});
      continue;
    }
    const Json c = Json::parse(data, nullptr, false);
    if (!c.is_discarded()) chunk(c);
  }
  return std::exchange(out_, {});
}

}  // namespace peregrine

#include "peregrine/server/responses_stream.h"

#include <utility>

#include "peregrine/server/openai_response.h"
#include "peregrine/server/responses_api.h"
#include "peregrine/server/sse_reader.h"

namespace peregrine {

using Json = nlohmann::json;

ResponsesStream::ResponsesStream(std::string chat_id, std::string model, std::int64_t created, nlohmann::ordered_json request)
    : request_(std::move(request)) {
  suffix_ = response_id(chat_id).substr(5);
  chat_ = {{"id", std::move(chat_id)},
           {"created", created},
           {"model", std::move(model)},
           {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}}},
           {"usage", {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}, {"prompt_tokens_details", {{"cached_tokens", 0}}}}}};
}

void ResponsesStream::event(std::string_view type, Json e) {
  e["type"] = type;
  e["sequence_number"] = sequence_++;
  out_.append("event: ").append(type).append("\ndata: ").append(dump_json(e)).append("\n\n");
}

Json ResponsesStream::response(std::string_view status) const {
  Json r = responses_object(chat_, request_);
  r["status"] = status;
  if (status == "in_progress") {
    r["output"] = Json::array();
    r["usage"] = nullptr;
  }
  return r;
}

Json ResponsesStream::open_item(Item kind) const {
  if (kind == Item::kReasoning) return {{"type", "reasoning"}, {"id", "rs_" + suffix_}, {"summary", Json::array()}, {"content", Json::array()}};
  return {{"type", "message"}, {"id", "msg_" + suffix_}, {"status", "in_progress"}, {"role", "assistant"}, {"content", Json::array()}};
}

void ResponsesStream::text(Item kind, const std::string& delta) {
  const std::string id = open_item(kind)["id"];
  if (item_ != kind) {
    close();
    item_ = kind;
    event("response.output_item.added", {{"output_index", ++output_index_}, {"item", open_item(kind)}});
    if (kind == Item::kMessage) {
      event("response.content_part.added", {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0},
                                             {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
    }
  }
  item_text_ += delta;
  Json& message = chat_["choices"][0]["message"];
  if (kind == Item::kMessage) {
    message["content"] = message["content"].get<std::string>() + delta;
    event("response.output_text.delta",
          {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"delta", delta}, {"logprobs", Json::array()}});
  } else {
    message["reasoning_content"] = message.value("reasoning_content", "") + delta;
    event("response.reasoning_text.delta", {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"delta", delta}});
  }
}

void ResponsesStream::close() {
  if (item_ == Item::kNone) return;
  Json item = open_item(item_);
  const std::string id = item["id"];
  if (item_ == Item::kMessage) {
    const Json part = {{"type", "output_text"}, {"text", item_text_}, {"annotations", Json::array()}};
    event("response.output_text.done",
          {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"text", item_text_}, {"logprobs", Json::array()}});
    event("response.content_part.done", {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"part", part}});
    item["status"] = "completed";
    item["content"] = Json::array({part});
  } else {
    event("response.reasoning_text.done", {{"item_id", id}, {"output_index", output_index_}, {"content_index", 0}, {"text", item_text_}});
    item["content"] = Json::array({{{"type", "reasoning_text"}, {"text", item_text_}}});
  }
  event("response.output_item.done", {{"output_index", output_index_}, {"item", std::move(item)}});
  item_ = Item::kNone;
  item_text_.clear();
}

void ResponsesStream::call(const Json& c) {
  close();
  Json& message = chat_["choices"][0]["message"];
  if (!message.contains("tool_calls")) message["tool_calls"] = Json::array();
  const std::string id = "fc_" + suffix_ + "_" + std::to_string(message["tool_calls"].size());
  message["tool_calls"].push_back(c);
  const std::string args = c["function"]["arguments"];
  Json item = {{"type", "function_call"}, {"id", id}, {"call_id", c["id"]}, {"name", c["function"]["name"]}, {"arguments", ""}, {"status", "in_progress"}};
  event("response.output_item.added", {{"output_index", ++output_index_}, {"item", item}});
  event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", output_index_}, {"delta", args}});
  event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", output_index_}, {"arguments", args}});
  item["arguments"] = args;
  item["status"] = "completed";
  event("response.output_item.done", {{"output_index", output_index_}, {"item", std::move(item)}});
}

// One OpenAI chat chunk.
void ResponsesStream::chunk(const Json& c) {
  if (c.contains("error")) {
    event("error", {{"code", nullptr}, {"message", c["error"].value("message", "")}, {"param", nullptr}});
    failed_ = true;
    return;
  }
  if (c.contains("usage") && c["usage"].is_object()) {  // the last chunk: choices []
    close();
    chat_["usage"] = c["usage"];
    const bool cut = chat_["choices"][0]["finish_reason"] == "length";
    event(cut ? "response.incomplete" : "response.completed", {{"response", response(cut ? "incomplete" : "completed")}});
    return;
  }
  if (!c.contains("choices") || c["choices"].empty()) return;
  const Json& choice = c["choices"][0];
  const Json& delta = choice["delta"];
  if (const auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string() && !r->get<std::string>().empty()) {
    text(Item::kReasoning, *r);
  }
  if (const auto t = delta.find("content"); t != delta.end() && t->is_string() && !t->get<std::string>().empty()) {
    text(Item::kMessage, *t);
  }
  if (const auto calls = delta.find("tool_calls"); calls != delta.end()) {
    for (const Json& one : *calls) call({{"id", one["id"]}, {"type", "function"}, {"function", one["function"]}});
  }
  if (choice["finish_reason"].is_string()) chat_["choices"][0]["finish_reason"] = choice["finish_reason"];
}

std::string ResponsesStream::push(std::string_view openai_sse) {
  if (!started_) {
    started_ = true;
    event("response.created", {{"response", response("in_progress")}});
    event("response.in_progress", {{"response", response("in_progress")}});
  }
  for (const std::string& data : reader_.feed(openai_sse)) {
    if (failed_) break;
    if (data == "[DONE]") continue;
    const Json c = Json::parse(data, nullptr, false);
    if (!c.is_discarded()) chunk(c);
  }
  return std::exchange(out_, {});
}

}  // namespace peregrine

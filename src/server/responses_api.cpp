#include "peregrine/server/responses_api.h"

#include <optional>
#include <utility>

#include "peregrine/core/json_util.h"
#include "request_fields.h"

namespace peregrine {
namespace {

using namespace request_fields;  // Json, Error, field, cat, joined_text, chat_tools

std::string index_of(std::string_view at, std::size_t i) { return cat({at, "[", std::to_string(i), "]"}); }

// A message's content: a string, or text parts (input_text, output_text, text) joined.
Error content_text(const Json& content, const std::string& at, std::string& out) {
  return joined_text(content, at, "", {"input_text", "output_text", "text"},
                                     {"input_image", "input_file", "input_audio"}, out);
}

// The last message of `out` as an assistant message to hang tool calls on (a new one if it is not).
Json& assistant_turn(Json& out) {
  if (out.empty() || out.back()["role"] != "assistant") out.push_back({{"role", "assistant"}, {"content", ""}});
  if (!out.back().contains("tool_calls")) out.back()["tool_calls"] = Json::array();
  return out.back();
}

Error input_item(const Json& item, const std::string& at, Json& out) {
  if (!item.is_object()) return invalid_param(at, "must be an object");
  const Json* type = field(item, "type");
  const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "message";
  if (t == "message") {
    const Json* role = field(item, "role");
    const Json* content = field(item, "content");
    if (role == nullptr || !role->is_string()) return invalid_param(at + ".role", "must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "user" && r != "system" && r != "assistant") {
      return invalid_param(at + ".role", "must be \"user\", \"system\", \"developer\" or \"assistant\"");
    }
    if (content == nullptr) return invalid_param(at + ".content", "is required");
    std::string text;
    if (auto e = content_text(*content, at + ".content", text)) return e;
    out.push_back({{"role", r}, {"content", text}});
    return std::nullopt;
  }
  if (t == "function_call") {
    const Json* id = field(item, "call_id");
    const Json* name = field(item, "name");
    const Json* args = field(item, "arguments");
    if (id == nullptr || !id->is_string() || name == nullptr || !name->is_string() || args == nullptr || !args->is_string()) {
      return invalid_param(at, "must be {\"type\": \"function_call\", \"call_id\", \"name\", \"arguments\": string}");
    }
    assistant_turn(out)["tool_calls"].push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *args}}}});
    return std::nullopt;
  }
  if (t == "function_call_output") {
    const Json* id = field(item, "call_id");
    const Json* output = field(item, "output");
    if (id == nullptr || !id->is_string() || output == nullptr) {
      return invalid_param(at, "must be {\"type\": \"function_call_output\", \"call_id\", \"output\"}");
    }
    std::string text;
    if (auto e = content_text(*output, at + ".output", text)) return e;
    out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", text}});
    return std::nullopt;
  }
  if (t == "reasoning") return std::nullopt;  // a model's own earlier reasoning: not replayed
  if (t == "item_reference") return invalid_param(at + ".type", "'item_reference': the server keeps no items (send them whole)");
  return invalid_param(at + ".type", cat({"'", json_util::printable(t), "' is not a supported input item"}));
}

Error input(const Json& body, Json& out) {
  if (const Json* instructions = field(body, "instructions"); instructions != nullptr) {
    if (!instructions->is_string()) return invalid_param("instructions", "must be a string");
    out.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const Json* in = field(body, "input");
  if (in == nullptr) return invalid_param("input", "is required");
  if (in->is_string()) {
    out.push_back({{"role", "user"}, {"content", *in}});
    return std::nullopt;
  }
  if (!in->is_array()) return invalid_param("input", "must be a string or an array of input items");
  for (std::size_t i = 0; i < in->size(); ++i) {
    if (auto e = input_item((*in)[i], index_of("input", i), out)) return e;
  }
  return std::nullopt;
}

// One Responses function tool {type: function, name, description, parameters, strict} as a chat function.
std::variant<Json, ApiError> function_tool(const Json& t, const std::string& at) {
  const Json* type = t.is_object() ? field(t, "type") : nullptr;
  if (type == nullptr || *type != "function") {
    return invalid_param(at + ".type", "only function tools are supported (no hosted tools: web search, file search, ...)");
  }
  const Json* name = field(t, "name");
  if (name == nullptr || !name->is_string()) return invalid_param(at + ".name", "must be a string");
  Json fn = {{"name", *name}};
  if (const Json* d = field(t, "description"); d != nullptr) fn["description"] = *d;
  if (const Json* p = field(t, "parameters"); p != nullptr) fn["parameters"] = *p;
  return fn;
}

Error tool_choice(const Json& body, Json& out) {
  const Json* choice = field(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    out["tool_choice"] = *choice;  // auto, none, required: the chat parser checks the word
    return std::nullopt;
  }
  const Json* type = choice->is_object() ? field(*choice, "type") : nullptr;
  const Json* name = choice->is_object() ? field(*choice, "name") : nullptr;
  if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
    return invalid_param("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
  }
  out["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  return std::nullopt;
}

// text.format: text (nothing), json_object, json_schema {name, schema, strict}.
Error text_format(const Json& body, Json& out) {
  const Json* text = field(body, "text");
  const Json* format = text != nullptr && text->is_object() ? field(*text, "format") : nullptr;
  if (format == nullptr) return std::nullopt;
  const Json* type = format->is_object() ? field(*format, "type") : nullptr;
  if (type != nullptr && *type == "text") return std::nullopt;
  if (type != nullptr && *type == "json_object") {
    out["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  const Json* schema = format->is_object() ? field(*format, "schema") : nullptr;
  if (type == nullptr || *type != "json_schema" || schema == nullptr) {
    return invalid_param("text.format", "must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"schema\": ...}");
  }
  Json spec = {{"name", format->value("name", "output")}, {"schema", *schema}};
  out["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  return std::nullopt;
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> responses_to_chat(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return api_error(invalid_argument("the request body must be a JSON object"));
  for (const char* stateful : {"previous_response_id", "conversation"}) {
    if (field(body, stateful) != nullptr) {
      return invalid_param(stateful, "is not supported: the server keeps no responses (send the whole conversation as input)");
    }
  }
  Json out = {{"messages", Json::array()}};
  if (auto e = input(body, out["messages"])) return *e;
  if (const Json* model = field(body, "model"); model != nullptr) out["model"] = *model;
  if (const Json* n = field(body, "max_output_tokens"); n != nullptr) out["max_tokens"] = *n;
  for (const char* key : {"temperature", "top_p", "top_k", "min_p", "seed", "parallel_tool_calls", "stream"}) {
    if (const Json* v = field(body, key); v != nullptr) out[key] = *v;
  }
  if (auto e = chat_tools(body, out, function_tool)) return *e;
  if (auto e = tool_choice(body, out)) return *e;
  if (auto e = text_format(body, out)) return *e;
  if (out.value("stream", false)) out["stream_options"] = {{"include_usage", true}};
  return out;
}

std::string response_id(std::string_view chat_id) { return cat({"resp_", chat_id.substr(chat_id.find('-') + 1)}); }

nlohmann::json responses_object(const nlohmann::json& chat, const nlohmann::ordered_json& request) {
  using J = nlohmann::json;
  const std::string suffix = response_id(chat["id"].get<std::string>()).substr(5);
  const J& message = chat["choices"][0]["message"];
  J output = J::array();
  if (message.contains("reasoning_content") && message["reasoning_content"].is_string()) {
    output.push_back({{"type", "reasoning"}, {"id", "rs_" + suffix}, {"summary", J::array()},
                      {"content", {{{"type", "reasoning_text"}, {"text", message["reasoning_content"]}}}}});
  }
  if (message["content"].is_string() && !message["content"].get<std::string>().empty()) {
    output.push_back({{"type", "message"}, {"id", "msg_" + suffix}, {"status", "completed"}, {"role", "assistant"},
                      {"content", {{{"type", "output_text"}, {"text", message["content"]}, {"annotations", J::array()}}}}});
  }
  if (message.contains("tool_calls")) {
    for (std::size_t k = 0; k < message["tool_calls"].size(); ++k) {
      const J& call = message["tool_calls"][k];
      output.push_back({{"type", "function_call"}, {"id", cat({"fc_", suffix, "_", std::to_string(k)})}, {"call_id", call["id"]},
                        {"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}, {"status", "completed"}});
    }
  }
  const bool cut = chat["choices"][0]["finish_reason"] == "length";
  const J& usage = chat["usage"];
  const auto echo = [&](const char* key, J fallback) {
    const auto it = request.find(key);
    return it == request.end() ? fallback : J::parse(it->dump());
  };
  return {{"id", "resp_" + suffix},
          {"object", "response"},
          {"created_at", chat["created"]},
          {"status", cut ? "incomplete" : "completed"},
          {"incomplete_details", cut ? J{{"reason", "max_output_tokens"}} : J(nullptr)},
          {"error", nullptr},
          {"model", chat["model"]},
          {"output", std::move(output)},
          {"instructions", echo("instructions", nullptr)},
          {"max_output_tokens", echo("max_output_tokens", nullptr)},
          {"temperature", echo("temperature", 1.0)},
          {"top_p", echo("top_p", 1.0)},
          {"tools", echo("tools", J::array())},
          {"tool_choice", echo("tool_choice", "auto")},
          {"parallel_tool_calls", echo("parallel_tool_calls", true)},
          {"text", echo("text", {{"format", {{"type", "text"}}}})},
          {"store", false},
          {"usage",
           {{"input_tokens", usage["prompt_tokens"]},
            {"input_tokens_details", {{"cached_tokens", usage["prompt_tokens_details"]["cached_tokens"]}}},
            {"output_tokens", usage["completion_tokens"]},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", usage["total_tokens"]}}}};
}

}  // namespace peregrine

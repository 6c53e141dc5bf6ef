#include "peregrine/server/anthropic_messages.h"

#include <optional>
#include <string_view>
#include <utility>

#include "peregrine/core/json_util.h"
#include "request_fields.h"

namespace peregrine {
namespace {

using namespace request_fields;  // Json, Error, field, cat, joined_text, chat_tools

// The text of a string or of an array of text blocks (joined by `sep`); `at` names the field.
Error text_of(const Json& content, const std::string& at, std::string_view sep, std::string& out) {
  return joined_text(content, at, sep, {"text"}, {"image", "document"}, out);
}

// One block of a message's content array, added to the OpenAI message(s) being built.
struct Turn {
  std::string text;
  std::string reasoning;
  Json tool_calls = Json::array();
  Json tool_messages = Json::array();  // a user turn's tool results, as "tool" messages
};

Error tool_use_block(const Json& block, const std::string& at, Turn& turn) {
  const Json* id = field(block, "id");
  const Json* name = field(block, "name");
  const Json* input = field(block, "input");
  if (id == nullptr || !id->is_string() || name == nullptr || !name->is_string() || input == nullptr || !input->is_object()) {
    return invalid_param(at, "must be {\"type\": \"tool_use\", \"id\": string, \"name\": string, \"input\": object}");
  }
  turn.tool_calls.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", input->dump()}}}});
  return std::nullopt;
}

Error tool_result_block(const Json& block, const std::string& at, Turn& turn) {
  const Json* id = field(block, "tool_use_id");
  if (id == nullptr || !id->is_string()) return invalid_param(at + ".tool_use_id", "must be the string id of the tool_use it answers");
  std::string result;
  if (const Json* content = field(block, "content"); content != nullptr) {
    if (auto e = text_of(*content, at + ".content", "\n", result)) return e;
  }
  const Json* is_error = field(block, "is_error");
  if (is_error != nullptr && is_error->is_boolean() && is_error->get<bool>()) result.insert(0, "Error: ");
  turn.tool_messages.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result}});
  return std::nullopt;
}

Error content_block(const Json& block, const std::string& at, const std::string& role, Turn& turn) {
  const Json* type = block.is_object() ? field(block, "type") : nullptr;
  if (type == nullptr || !type->is_string()) return invalid_param(at + ".type", "must be a string");
  const std::string t = type->get<std::string>();
  const bool assistant = role == "assistant";
  if (t == "text") {
    std::string text;
    if (auto e = text_of(Json::array({block}), at, "", text)) return e;
    turn.text += text;
    return std::nullopt;
  }
  if (t == "tool_use" && assistant) return tool_use_block(block, at, turn);
  if (t == "tool_result" && !assistant) return tool_result_block(block, at, turn);
  if (t == "thinking" && assistant) {
    const Json* thinking = field(block, "thinking");
    if (thinking == nullptr || !thinking->is_string()) return invalid_param(at + ".thinking", "must be a string");
    turn.reasoning += thinking->get<std::string>();
    return std::nullopt;
  }
  if (t == "redacted_thinking" && assistant) return std::nullopt;  // encrypted: nothing a local model can read
  if (t == "image" || t == "document") {
    return invalid_param(at + ".type", cat({"'", t, "': image input is not supported (the model reads text only)"}));
  }
  return invalid_param(at + ".type", cat({"'", json_util::printable(t), "' is not a supported content block on a",
                                          assistant ? "n assistant" : " user", " turn"}));
}

// One Anthropic message → OpenAI messages appended to `out`.
Error message(const Json& m, const std::string& at, Json& out) {
  const Json* role = m.is_object() ? field(m, "role") : nullptr;
  if (role == nullptr || (*role != "user" && *role != "assistant")) {
    return invalid_param(at + ".role", "must be \"user\" or \"assistant\"");
  }
  const std::string r = role->get<std::string>();
  const Json* content = field(m, "content");
  if (content == nullptr) return invalid_param(at + ".content", "is required");
  Turn turn;
  if (content->is_string()) {
    turn.text = content->get<std::string>();
  } else if (content->is_array()) {
    for (std::size_t j = 0; j < content->size(); ++j) {
      if (auto e = content_block((*content)[j], cat({at, ".content[", std::to_string(j), "]"}), r, turn)) return e;
    }
  } else {
    return invalid_param(at + ".content", "must be a string or an array of content blocks");
  }
  for (const Json& t : turn.tool_messages) out.push_back(t);
  if (!turn.tool_messages.empty() && turn.text.empty()) return std::nullopt;
  Json msg = {{"role", r}, {"content", turn.text}};
  if (!turn.tool_calls.empty()) msg["tool_calls"] = turn.tool_calls;
  if (!turn.reasoning.empty()) msg["reasoning_content"] = turn.reasoning;
  out.push_back(std::move(msg));
  return std::nullopt;
}

Error messages(const Json& body, Json& out) {
  if (const Json* system = field(body, "system"); system != nullptr) {
    std::string text;
    if (auto e = text_of(*system, "system", "\n", text)) return e;
    out.push_back({{"role", "system"}, {"content", text}});
  }
  const Json* list = field(body, "messages");
  if (list == nullptr) return invalid_param("messages", "is required");
  if (!list->is_array()) return invalid_param("messages", "must be an array");
  for (std::size_t i = 0; i < list->size(); ++i) {
    if (auto e = message((*list)[i], cat({"messages[", std::to_string(i), "]"}), out)) return e;
  }
  return std::nullopt;
}

// One Anthropic custom tool {name, description, input_schema} as a chat function.
std::variant<Json, ApiError> custom_tool(const Json& t, const std::string& at) {
  const Json* type = t.is_object() ? field(t, "type") : nullptr;
  if (type != nullptr && *type != "custom") {
    return invalid_param(at + ".type", cat({json_util::printable(type->dump()), ": only custom tools (name, description, input_schema) are supported"}));
  }
  const Json* name = t.is_object() ? field(t, "name") : nullptr;
  const Json* schema = t.is_object() ? field(t, "input_schema") : nullptr;
  if (name == nullptr || !name->is_string() || schema == nullptr || !schema->is_object()) {
    return invalid_param(at, "must be {\"name\": string, \"description\": string, \"input_schema\": object}");
  }
  Json fn = {{"name", *name}};
  if (const Json* d = field(t, "description"); d != nullptr) fn["description"] = *d;
  fn["parameters"] = *schema;
  return fn;
}

Error tool_choice(const Json& body, Json& out) {
  const Json* choice = field(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  const Json* type = choice->is_object() ? field(*choice, "type") : nullptr;
  const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "";
  if (t == "auto" || t == "none") {
    out["tool_choice"] = t;
  } else if (t == "any") {
    out["tool_choice"] = "required";
  } else if (t == "tool") {
    const Json* name = field(*choice, "name");
    if (name == nullptr || !name->is_string()) return invalid_param("tool_choice.name", "must name a tool");
    out["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return invalid_param("tool_choice", "must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
  }
  if (const Json* d = field(*choice, "disable_parallel_tool_use"); d != nullptr && d->is_boolean()) {
    out["parallel_tool_calls"] = !d->get<bool>();
  }
  return std::nullopt;
}

// output_config.format {"type": "json_schema", "schema"} → response_format (effort: no effect).
Error output_format(const Json& body, Json& out) {
  const Json* config = field(body, "output_config");
  if (config == nullptr || config->is_null()) return std::nullopt;
  const Json* format = config->is_object() ? field(*config, "format") : nullptr;
  if (format == nullptr || format->is_null()) return std::nullopt;
  const Json* type = format->is_object() ? field(*format, "type") : nullptr;
  const Json* schema = format->is_object() ? field(*format, "schema") : nullptr;
  if (type == nullptr || *type != "json_schema" || schema == nullptr) {
    return invalid_param("output_config.format", "must be {\"type\": \"json_schema\", \"schema\": {...}}");
  }
  out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
  return std::nullopt;
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> anthropic_to_openai(const nlohmann::ordered_json& body,
                                                                  AnthropicEndpoint endpoint) {
  if (!body.is_object()) return api_error(invalid_argument("the request body must be a JSON object"));
  Json out = {{"messages", Json::array()}};
  if (auto e = messages(body, out["messages"])) return *e;
  if (const Json* model = field(body, "model"); model != nullptr) out["model"] = *model;
  if (auto e = chat_tools(body, out, custom_tool)) return *e;
  if (auto e = tool_choice(body, out)) return *e;
  if (endpoint == AnthropicEndpoint::kCountTokens) return out;
  if (auto e = output_format(body, out)) return *e;
  const Json* max_tokens = field(body, "max_tokens");
  if (max_tokens == nullptr) return invalid_param("max_tokens", "is required");
  out["max_tokens"] = *max_tokens;
  for (const char* key : {"temperature", "top_p", "top_k", "stream"}) {
    if (const Json* v = field(body, key); v != nullptr) out[key] = *v;
  }
  if (const Json* stop = field(body, "stop_sequences"); stop != nullptr) out["stop"] = *stop;
  if (out.value("stream", false)) out["stream_options"] = {{"include_usage", true}};
  return out;
}

std::string anthropic_message_id(std::string_view openai_id) {
  return cat({"msg_", openai_id.substr(openai_id.find('-') + 1)});
}

std::string anthropic_stop_reason(const std::string& finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return "end_turn";
}

nlohmann::json anthropic_message_json(const nlohmann::json& body) {
  const nlohmann::json& choice = body["choices"][0];
  const nlohmann::json& message = choice["message"];
  nlohmann::json content = nlohmann::json::array();
  if (message.contains("reasoning_content") && message["reasoning_content"].is_string()) {
    content.push_back({{"type", "thinking"}, {"thinking", message["reasoning_content"]}, {"signature", ""}});
  }
  const std::string text = message["content"].is_string() ? message["content"].get<std::string>() : "";
  const bool calls = message.contains("tool_calls");
  if (!text.empty() || !calls) content.push_back({{"type", "text"}, {"text", text}});
  if (calls) {
    for (const auto& call : message["tool_calls"]) {
      auto input = nlohmann::json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
      content.push_back({{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]},
                         {"input", input.is_discarded() ? nlohmann::json::object() : input}});
    }
  }
  const nlohmann::json& usage = body["usage"];
  const bool stop_string = choice.contains("stop_reason") && choice["stop_reason"].is_string();
  return {{"id", anthropic_message_id(body["id"].get<std::string>())},
          {"type", "message"},
          {"role", "assistant"},
          {"model", body["model"]},
          {"content", std::move(content)},
          {"stop_reason", stop_string ? "stop_sequence" : anthropic_stop_reason(choice["finish_reason"].get<std::string>())},
          {"stop_sequence", stop_string ? choice["stop_reason"] : nlohmann::json(nullptr)},
          {"usage",
           {{"input_tokens", usage["prompt_tokens"]},
            {"output_tokens", usage["completion_tokens"]},
            {"cache_read_input_tokens", usage.contains("prompt_tokens_details") ? usage["prompt_tokens_details"]["cached_tokens"] : nlohmann::json(0)},
            {"cache_creation_input_tokens", 0}}}};
}

nlohmann::json anthropic_error_json(const ApiError& e) {
  const char* type = "api_error";
  switch (e.http_status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

}  // namespace peregrine

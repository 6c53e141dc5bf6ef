#include "peregrine/server/generic_tools.h"

#include <string>

namespace peregrine {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kInstructions =
    "You can call the functions below. To call one, reply with nothing but one JSON object "
    "{\"name\": <the function's name>, \"arguments\": <an object of its parameters>}; "
    "to answer without a call, reply in plain text.\n\nFunctions:";

constexpr std::string_view kR1Instructions =
    "You can call the functions below. To call them, reply with <｜tool▁calls▁begin｜>, then for "
    "each call <｜tool▁call▁begin｜>function<｜tool▁sep｜>, the function's name, a new line, an "
    "object of its parameters as JSON between ```json and ``` lines, and <｜tool▁call▁end｜>; "
    "end with <｜tool▁calls▁end｜>. To answer without a call, reply in plain text.\n\nFunctions:";

std::string instructions(const Json& tools, ToolSyntax syntax) {
  std::string text(syntax == ToolSyntax::kJson ? kInstructions : kR1Instructions);
  for (const Json& tool : tools) {
    const Json& fn = tool.at("function");
    Json line = {{"name", fn.at("name")}};
    if (fn.contains("description")) line["description"] = fn["description"];
    line["parameters"] = fn.contains("parameters") ? fn["parameters"] : Json::object();
    text.append("\n").append(line.dump());
  }
  return text;
}

// An assistant's calls as JSON lines after its content.
std::string calls_text(const ChatMessage& m) {
  std::string text = m.content;
  for (const Json& call : m.tool_calls) {
    const Json& fn = call.at("function");
    Json args = Json::parse(fn.at("arguments").get<std::string>(), nullptr, false);
    if (args.is_discarded()) args = fn.at("arguments");
    if (!text.empty()) text.append("\n");
    text.append(Json({{"name", fn.at("name")}, {"arguments", args}}).dump());
  }
  return text;
}

// The function a tool message's call named, looked up in the assistant turns before it.
std::string called_name(std::span<const ChatMessage> before, const std::string& call_id) {
  for (auto it = before.rbegin(); it != before.rend(); ++it) {
    if (it->tool_calls.is_null()) continue;
    for (const Json& call : it->tool_calls) {
      if (call.value("id", "") == call_id) return call.at("function").at("name").get<std::string>();
    }
  }
  return "the call " + call_id;
}

}  // namespace

std::vector<ChatMessage> generic_tool_messages(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools,
                                               ToolInstructions where, ToolSyntax syntax) {
  const bool rewrite = syntax == ToolSyntax::kJson;
  std::vector<ChatMessage> out;
  bool told = tools.is_null() || tools.empty();
  const std::string_view host = where == ToolInstructions::kSystem ? "system" : "user";
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == host && !told) {
      std::string text = instructions(tools, syntax);
      if (!m.content.empty()) text = where == ToolInstructions::kSystem ? m.content + "\n\n" + text : text + "\n\n" + m.content;
      out.emplace_back(m.role, std::move(text));
      told = true;
    } else if (rewrite && m.role == "assistant" && !m.tool_calls.is_null()) {
      out.emplace_back("assistant", calls_text(m));
    } else if (rewrite && m.role == "tool") {
      std::string result = "Result of " + called_name(messages.first(i), m.tool_call_id) + ": " + m.content;
      if (!out.empty() && out.back().role == "user" && i > 0 && messages[i - 1].role == "tool") {
        out.back().content.append("\n").append(result);
      } else {
        out.emplace_back("user", std::move(result));
      }
    } else {
      out.push_back(m);
    }
  }
  if (!told) out.insert(out.begin(), ChatMessage(std::string(host), instructions(tools, syntax)));
  return out;
}

}  // namespace peregrine

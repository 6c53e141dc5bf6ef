#include "peregrine/server/tool_calls.h"

#include <algorithm>
#include <cstdio>

#include "peregrine/sampling/json_schema_grammar.h"
#include "peregrine/server/text_stream.h"

namespace peregrine {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";


std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b));
}

}  // namespace

bool template_has_hermes_tool_calls(std::string_view template_source) {
  return template_source.find(kOpen) != std::string_view::npos && template_source.find("tools") != std::string_view::npos;
}

// {"name": string, "arguments": object or JSON text} → a call. False when `body` is not one.
bool ToolCallParser::parse_call(std::string_view body) {
  const auto j = nlohmann::ordered_json::parse(trim(body), nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("arguments")) return false;
  const auto& args = j["arguments"];
  if (!args.is_object() && !args.is_string()) return false;
  char id[32];
  std::snprintf(id, sizeof id, "call_%016llx%08llx", static_cast<unsigned long long>(next_id_),
                static_cast<unsigned long long>(n_calls_));
  calls_.push_back({id, j["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()});
  ++n_calls_;
  return true;
}

// Releases pending_ up to what may still be a marker or an open block, parsing whole blocks.
std::string ToolCallParser::release_blocks() {
  std::string released;
  while (true) {
    const auto open = pending_.find(kOpen);
    if (open == std::string::npos) {
      const std::size_t keep = partial_marker(pending_, kOpen);
      released += pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return released;
    }
    const auto close = pending_.find(kClose, open + kOpen.size());
    if (close == std::string::npos) {  // an open block: wait for its end
      released += pending_.substr(0, open);
      pending_.erase(0, open);
      return released;
    }
    const bool call = parse_call(std::string_view(pending_).substr(open + kOpen.size(), close - open - kOpen.size()));
    released += pending_.substr(0, call ? open : close + kClose.size());
    pending_.erase(0, close + kClose.size());
  }
}

std::string ToolCallParser::push(std::string_view text) {
  pending_ += text;
  if (!decided_) {
    const auto first = pending_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    decided_ = true;
    json_reply_ = pending_[first] == '{' || pending_[first] == '`';
  }
  return json_reply_ ? "" : release_blocks();
}

std::string ToolCallParser::flush() {
  if (json_reply_) {
    std::string body = trim(pending_);
    if (body.starts_with("```")) {  // a fenced block: ```json\n...\n```
      const auto nl = body.find('\n');
      body = nl != std::string::npos && body.ends_with("```") ? body.substr(nl + 1, body.size() - 3 - nl - 1) : "";
    }
    const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
    const bool declared = j.is_object() && j.contains("name") && j["name"].is_string() &&
                          std::find(names_.begin(), names_.end(), j["name"].get<std::string>()) != names_.end();
    if (declared && parse_call(body)) {
      pending_.clear();
      return "";
    }
    json_reply_ = false;
  }
  std::string released = release_blocks();
  return released + std::exchange(pending_, {});
}

std::vector<ToolCall> ToolCallParser::take_calls() { return std::exchange(calls_, {}); }

Expected<std::string> tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only, bool parallel) {
  nlohmann::ordered_json any = nlohmann::ordered_json::array();
  for (const auto& tool : tools) {
    const auto& fn = tool.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    nlohmann::ordered_json call = {{"type", "object"},
                                   {"properties", {{"name", {{"const", name}}},
                                                   {"arguments", fn.contains("parameters") ? fn.at("parameters") : nlohmann::ordered_json::object()}}},
                                   {"required", {"name", "arguments"}}};
    any.push_back(std::move(call));
  }
  auto gbnf = json_schema_to_gbnf({{"anyOf", any}});
  if (!gbnf) return invalid_argument("a tool's parameters: " + gbnf.status().message());
  // The schema's grammar becomes rule `call`; root frames one or more calls.
  std::string text = "call" + gbnf->substr(gbnf->find(" ::= "));
  const std::string one = R"("<tool_call>\n" call "\n</tool_call>")";
  return "root ::= " + one + (parallel ? " ( \"\\n\" " + one + " )*" : "") + "\n" + text;
}

}  // namespace peregrine

#include "peregrine/server/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "peregrine/sampling/json_schema_grammar.h"
#include "peregrine/server/text_stream.h"
#include "request_fields.h"

namespace peregrine {
namespace {

using request_fields::cat;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kR1Calls = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kR1CallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kR1Call = "<｜tool▁call▁begin｜>";
constexpr std::string_view kR1CallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kR1Sep = "<｜tool▁sep｜>";

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b));
}

// A ```lang\n...\n``` fence's body ("" when `body` is an unterminated fence); other text as it is.
std::string unfenced(std::string body) {
  if (!body.starts_with("```")) return body;
  const auto nl = body.find('\n');
  return nl != std::string::npos && body.ends_with("```") ? body.substr(nl + 1, body.size() - 3 - nl - 1) : "";
}

// The marker after which a format's calls run to the end of the output ("" : none).
std::string_view calls_marker(ToolCallFormat format) {
  if (format == ToolCallFormat::kMistral) return kMistralCalls;
  return format == ToolCallFormat::kDeepSeekR1 ? kR1Calls : std::string_view{};
}

// One DeepSeek R1 call block's body, "TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```" (the fence
// optional), as {"name", "arguments"}; null when it is not one.
nlohmann::ordered_json r1_call(std::string_view block) {
  const auto sep = block.find(kR1Sep);
  if (sep == std::string_view::npos) return nullptr;
  const std::string rest = trim(block.substr(sep + kR1Sep.size()));
  const auto nl = rest.find('\n');
  const std::string name = trim(std::string_view(rest).substr(0, nl));
  const std::string args = nl == std::string::npos ? "{}" : unfenced(trim(std::string_view(rest).substr(nl + 1)));
  auto j = nlohmann::ordered_json::parse(args, nullptr, false);
  if (name.empty() || j.is_discarded()) return nullptr;
  return {{"name", name}, {"arguments", std::move(j)}};
}

// `gbnf` with every rule name, where defined and where referenced, prefixed by `prefix` (string
// literals, character classes and comments are left as they are): grammars of several schemas
// in one text without clashing rule names.
std::string prefixed_rules(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  const auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (std::size_t i = 0; i < gbnf.size();) {
    std::size_t j = i + 1;
    if (gbnf[i] == '"' || gbnf[i] == '[') {
      const char close = gbnf[i] == '"' ? '"' : ']';
      while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, gbnf.size());
    } else if (gbnf[i] == '#') {
      j = std::min(gbnf.find('\n', i), gbnf.size());
    } else if (std::isalpha(static_cast<unsigned char>(gbnf[i]))) {
      while (j < gbnf.size() && name_char(gbnf[j])) ++j;
      out.append(prefix);
    }
    out.append(gbnf.substr(i, j - i));
    i = j;
  }
  return out;
}

// DeepSeek R1's forced calls: each tool's call block with its own arguments grammar (rules
// prefixed t0-, t1-, ...), one block or (`parallel`) more between the calls markers.
Expected<std::string> r1_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only, bool parallel) {
  std::string calls, rules;
  int n = 0;
  for (const auto& tool : tools) {
    const auto& fn = tool.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    auto args = json_schema_to_gbnf(fn.contains("parameters") ? fn.at("parameters") : nlohmann::ordered_json::object());
    if (!args) return invalid_argument("a tool's parameters: " + args.status().message());
    const std::string prefix = cat({"t", std::to_string(n++), "-"});
    calls.append(calls.empty() ? "" : " | ").append(prefix).append("call");
    rules.append(cat({prefix, "call ::= ", gbnf_literal(cat({kR1Call, "function", kR1Sep, name, "\n```json\n"})), " ", prefix,
                      "root ", gbnf_literal(cat({"\n```", kR1CallEnd})), "\n", prefixed_rules(*args, prefix), "\n"}));
  }
  const std::string repeat = parallel ? " ( \"\\n\" call )*" : "";
  return cat({"root ::= ", gbnf_literal(kR1Calls), " call", repeat, " ", gbnf_literal(kR1CallsEnd), "\ncall ::= ", calls, "\n", rules});
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view source) {
  const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has(kMistralCalls)) return ToolCallFormat::kMistral;
  if (has(kR1Calls)) return ToolCallFormat::kDeepSeekR1;
  if (has(kOpen) && has("tools")) return ToolCallFormat::kHermes;
  if (has(R"({"name": function name, "parameters")")) return ToolCallFormat::kLlama3;
  return ToolCallFormat::kGeneric;
}

bool template_shows_tools(std::string_view source, ToolCallFormat format) {
  if (format == ToolCallFormat::kGeneric) return false;
  return format != ToolCallFormat::kDeepSeekR1 || source.find("tools") != std::string_view::npos;
}

// {"name": string, "arguments" (or Llama 3.x's "parameters"): object or JSON text} → a call.
// False when `j` is not one.
bool ToolCallParser::parse_call(const nlohmann::ordered_json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key) || (!j[key].is_object() && !j[key].is_string())) return false;
  const auto& args = j[key];
  char id[32];
  if (format_ == ToolCallFormat::kMistral) {  // its template refuses other ids: 9 letters and digits
    static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::uint64_t x = next_id_ ^ (0x9e3779b97f4a7c15ull * (n_calls_ + 1));
    for (int k = 0; k < 9; ++k, x /= kAlnum.size()) id[k] = kAlnum[x % kAlnum.size()];
    id[9] = '\0';
  } else {
    std::snprintf(id, sizeof id, "call_%016llx%08llx", static_cast<unsigned long long>(next_id_),
                  static_cast<unsigned long long>(n_calls_));
  }
  calls_.push_back({id, j["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()});
  ++n_calls_;
  return true;
}

// `body`: one call, or (Mistral) an array of calls — every one must parse, and with
// `declared_only` name a declared tool; else nothing is taken.
bool ToolCallParser::parse_calls(std::string_view body, bool declared_only) {
  const auto j = nlohmann::ordered_json::parse(trim(body), nullptr, false);
  const bool lists = format_ == ToolCallFormat::kMistral || format_ == ToolCallFormat::kDeepSeekR1;
  const nlohmann::ordered_json all = j.is_array() && lists ? j : nlohmann::ordered_json::array({j});
  if (all.empty()) return false;
  for (const auto& c : all) {
    const bool named = c.is_object() && c.contains("name") && c["name"].is_string();
    if (!named || (declared_only && std::find(names_.begin(), names_.end(), c["name"].get<std::string>()) == names_.end())) {
      return false;
    }
  }
  std::vector<ToolCall> taken = std::move(calls_);
  const std::size_t before = n_calls_;
  for (const auto& c : all) {
    if (!parse_call(c)) {
      calls_ = std::move(taken);
      n_calls_ = before;
      return false;
    }
  }
  taken.insert(taken.end(), calls_.begin(), calls_.end());
  calls_ = std::move(taken);
  return true;
}

// `body`: the text after <｜tool▁calls▁begin｜>, one or more call blocks (and the closing
// marker); every block must parse, else nothing is taken.
bool ToolCallParser::parse_r1_calls(std::string_view body) {
  const auto end = body.find(kR1CallsEnd);
  if (end != std::string_view::npos && !trim(body.substr(end + kR1CallsEnd.size())).empty()) return false;
  body = body.substr(0, end);
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (auto open = body.find(kR1Call); open != std::string_view::npos; open = body.find(kR1Call)) {
    if (!trim(body.substr(0, open)).empty()) return false;
    const auto close = body.find(kR1CallEnd, open);
    auto call = r1_call(body.substr(open + kR1Call.size(), close == std::string_view::npos ? close : close - open - kR1Call.size()));
    if (call.is_null()) return false;
    calls.push_back(std::move(call));
    body = close == std::string_view::npos ? std::string_view{} : body.substr(close + kR1CallEnd.size());
  }
  return !calls.empty() && trim(body).empty() && parse_calls(calls.dump(), false);
}

// Releases pending_ up to what may still be a marker or an open block, parsing whole blocks.
std::string ToolCallParser::release_blocks() {
  std::string released;
  if (format_ == ToolCallFormat::kLlama3) return std::exchange(pending_, {});
  const std::string_view to_end = calls_marker(format_);
  const std::string_view open_marker = to_end.empty() ? kOpen : to_end;
  while (true) {
    const auto open = pending_.find(open_marker);
    if (open == std::string::npos) {
      const std::size_t keep = partial_marker(pending_, open_marker);
      released += pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return released;
    }
    if (!to_end.empty()) {  // the calls run to the end of the output
      released += pending_.substr(0, open);
      pending_.erase(0, open);
      in_calls_ = true;
      return released;
    }
    const auto close = pending_.find(kClose, open + kOpen.size());
    if (close == std::string::npos) {  // an open block: wait for its end
      released += pending_.substr(0, open);
      pending_.erase(0, open);
      return released;
    }
    const bool call = parse_calls(std::string_view(pending_).substr(open + kOpen.size(), close - open - kOpen.size()), false);
    released += pending_.substr(0, call ? open : close + kClose.size());
    pending_.erase(0, close + kClose.size());
  }
}

// Whether a reply starting with `first` is held whole for the JSON fallback.
bool ToolCallParser::held_whole(char first) const {
  if (first == '{' || first == '`') return true;
  if (format_ == ToolCallFormat::kLlama3) return first == '<';
  return format_ == ToolCallFormat::kMistral && first == '[';
}

std::string ToolCallParser::push(std::string_view text) {
  pending_ += text;
  if (!decided_) {
    const auto first = pending_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    decided_ = true;
    json_reply_ = held_whole(pending_[first]);
  }
  return json_reply_ || in_calls_ ? "" : release_blocks();
}

std::string ToolCallParser::flush() {
  if (in_calls_) {
    const std::string_view calls = std::string_view(pending_).substr(calls_marker(format_).size());
    if (format_ == ToolCallFormat::kDeepSeekR1 ? parse_r1_calls(calls) : parse_calls(calls, false)) {
      pending_.clear();
      return "";
    }
    return std::exchange(pending_, {});
  }
  if (json_reply_) {
    std::string body = trim(pending_);
    if (body.starts_with(kPythonTag)) body = trim(std::string_view(body).substr(kPythonTag.size()));
    if (body.starts_with(kMistralCalls)) body = body.substr(kMistralCalls.size());
    if (parse_calls(unfenced(std::move(body)), true)) {
      pending_.clear();
      return "";
    }
    json_reply_ = false;
  }
  std::string released = release_blocks();
  if (in_calls_) return released + flush();
  return released + std::exchange(pending_, {});
}

std::vector<ToolCall> ToolCallParser::take_calls() { return std::exchange(calls_, {}); }

Expected<std::string> tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only, bool parallel,
                                     ToolCallFormat format) {
  if (format == ToolCallFormat::kMistral) {
    return unsupported("forcing a tool call is not supported for this chat template's tool-call format");
  }
  if (format == ToolCallFormat::kDeepSeekR1) return r1_call_gbnf(tools, only, parallel);
  const bool llama3 = format == ToolCallFormat::kLlama3;
  const bool single = llama3 || format == ToolCallFormat::kGeneric;  // one bare call per reply
  nlohmann::ordered_json any = nlohmann::ordered_json::array();
  for (const auto& tool : tools) {
    const auto& fn = tool.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    const char* args = llama3 ? "parameters" : "arguments";
    nlohmann::ordered_json call = {{"type", "object"},
                                   {"properties", {{"name", {{"const", name}}},
                                                   {args, fn.contains("parameters") ? fn.at("parameters") : nlohmann::ordered_json::object()}}},
                                   {"required", {"name", args}}};
    any.push_back(std::move(call));
  }
  auto gbnf = json_schema_to_gbnf({{"anyOf", any}});
  if (!gbnf) return invalid_argument("a tool's parameters: " + gbnf.status().message());
  // The schema's grammar becomes rule `call`; root frames one or more calls.
  std::string text = "call" + gbnf->substr(gbnf->find(" ::= "));
  if (single) return "root ::= call\n" + text;
  const std::string one = R"("<tool_call>\n" call "\n</tool_call>")";
  return "root ::= " + one + (parallel ? " ( \"\\n\" " + one + " )*" : "") + "\n" + text;
}

}  // namespace peregrine

// Tool calls in a model's output, OpenAI's `tool_calls`: the Hermes format that Qwen2.5, Hermes
// and many fine-tunes were trained on (their chat templates tell the model to answer
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>), parsed as the text streams, and
// the grammar that forces such a call (tool_choice "required" or a named function).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// One parsed call: OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}.
struct ToolCall {
  std::string id;         // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // JSON text of an object
};

/// Whether a chat template renders `tools` with Hermes-style <tool_call> instructions.
bool template_has_hermes_tool_calls(std::string_view template_source);

/// Splits streamed output text into content and tool calls. A Hermes <tool_call> block that
/// parses ({"name": string, "arguments": object or JSON text}) becomes a ToolCall; one that does
/// not stays content. Text that may be the start of "<tool_call>" is held back until it is
/// known not to be. The generic JSON fallback: a reply that is one such object (optionally in a
/// ``` fence) naming a declared tool is a call too — a reply starting with '{' or '`' is held
/// back whole until the end to tell.
class ToolCallParser {
 public:
  /// `seed`: where call ids come from (one server-wide random draw per request); `names`: the
  /// declared functions.
  ToolCallParser(std::uint64_t seed, std::vector<std::string> names) : names_(std::move(names)), next_id_(seed) {}

  /// Appends `text`; returns the content that can be released now.
  std::string push(std::string_view text);
  /// At the end of the output: the held-back text (an unterminated block is content).
  std::string flush();
  /// Calls completed since the last take.
  std::vector<ToolCall> take_calls();
  /// Whether any call was parsed (finish_reason "tool_calls").
  bool called() const { return n_calls_ > 0; }

 private:
  bool parse_call(std::string_view body);
  std::string release_blocks();

  std::vector<std::string> names_;
  bool decided_ = false;    // the reply's first character was seen
  bool json_reply_ = false;  // it was '{' or '`': held whole for the fallback
  std::string pending_;  // held back: a possible marker prefix, an open block, or a JSON reply
  std::vector<ToolCall> calls_;
  std::uint64_t next_id_;
  std::size_t n_calls_ = 0;
};

/// GBNF that makes the model answer with Hermes tool calls only: one call (or, with `parallel`,
/// one or more) of `tools` (OpenAI's list), or of the one named `only` when not empty, each
/// call's arguments following that function's `parameters` schema
/// (sampling/json_schema_grammar.h). Errors: those of json_schema_to_gbnf, naming the tool.
Expected<std::string> tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only, bool parallel);

}  // namespace peregrine

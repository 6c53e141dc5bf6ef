// Tool calls in a model's output, OpenAI's `tool_calls`, in the format the model's chat template
// teaches it: Hermes <tool_call> blocks (Qwen2.5, Hermes and many fine-tunes), Llama 3.x's
// {"name", "parameters"} reply, Mistral's [TOOL_CALLS] array; parsed as the text streams, and
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
  std::string id;         // "call_" + 24 hex digits; Mistral: 9 letters and digits (its template's rule)
  std::string name;
  std::string arguments;  // JSON text of an object
};

/// How a chat template tells the model to call the tools it renders.
enum class ToolCallFormat {
  kGeneric,  // the template renders no tools: the server describes them (server/generic_tools.h)
             // and reads a reply that is one {"name", "arguments"} object (or Hermes blocks)
  kHermes,   // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks, one or more
  kLlama3,   // the whole reply one {"name": ..., "parameters": {...}} (after <|python_tag|> or not)
  kMistral,  // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (the marker may be a control
             // token the detokenizer leaves out: a reply that is such an array is calls too)
  kDeepSeekR1,  // <｜tool▁calls▁begin｜> then per call <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
                // \n```json\n{...}\n```<｜tool▁call▁end｜>, then <｜tool▁calls▁end｜> (DeepSeek R1 and
                // its distills; their template shows calls and results but not the tools)
};

/// The format of a chat template's tool instructions (Mistral's [TOOL_CALLS], DeepSeek R1's
/// <｜tool▁calls▁begin｜>, Hermes' <tool_call> with a tools variable, Llama 3.x's 'Respond in the
/// format {"name": function name, "parameters": ...}'), kGeneric for a template without one.
ToolCallFormat tool_call_format(std::string_view template_source);

/// Whether a template of `format` describes the tools itself (its `tools` variable); where it
/// does not, the server does (server/generic_tools.h): kGeneric always, DeepSeek R1's own
/// template too (llama.cpp's rewrite of it shows them).
bool template_shows_tools(std::string_view template_source, ToolCallFormat format);

/// Splits streamed output text into content and tool calls of `format` (kGeneric reads as Hermes).
/// A call that parses ({"name": string, "arguments" (Llama 3.x: "parameters"): object or JSON
/// text}) becomes a ToolCall; one that does not stays content. Hermes: text that may be the
/// start of "<tool_call>" is held back until it is known not to be; the generic JSON fallback: a
/// reply that is one such object (optionally in a ``` fence) naming a declared tool is a call
/// too — a reply starting with '{' or '`' is held back whole until the end to tell. Llama 3.x:
/// that fallback only ('<' held too, for <|python_tag|>). Mistral: the text before [TOOL_CALLS]
/// is content, the array after it calls (all of them, or it stays content); a reply starting
/// with '[' is held whole as a possible array. DeepSeek R1: as Mistral, after
/// <｜tool▁calls▁begin｜> every <｜tool▁call▁begin｜> … <｜tool▁call▁end｜> block is a call (its
/// arguments in a ```json fence or bare).
class ToolCallParser {
 public:
  /// `seed`: where call ids come from (one server-wide random draw per request); `names`: the
  /// declared functions.
  ToolCallParser(std::uint64_t seed, std::vector<std::string> names, ToolCallFormat format = ToolCallFormat::kHermes)
      : names_(std::move(names)), format_(format), next_id_(seed) {}

  /// Appends `text`; returns the content that can be released now.
  std::string push(std::string_view text);
  /// At the end of the output: the held-back text (an unterminated block is content).
  std::string flush();
  /// Calls completed since the last take.
  std::vector<ToolCall> take_calls();
  /// Whether any call was parsed (finish_reason "tool_calls").
  bool called() const { return n_calls_ > 0; }

 private:
  bool parse_call(const nlohmann::ordered_json& j);
  bool parse_calls(std::string_view body, bool declared_only);
  bool parse_r1_calls(std::string_view body);
  std::string release_blocks();
  bool held_whole(char first) const;

  std::vector<std::string> names_;
  ToolCallFormat format_;
  bool decided_ = false;    // the reply's first character was seen
  bool json_reply_ = false;  // held whole for the fallback
  bool in_calls_ = false;    // Mistral, DeepSeek R1: past the calls marker, held to the end
  std::string pending_;  // held back: a possible marker prefix, an open block, or a JSON reply
  std::vector<ToolCall> calls_;
  std::uint64_t next_id_;
  std::size_t n_calls_ = 0;
};

/// GBNF that makes the model answer with tool calls only, in `format` (Hermes, Llama 3.x,
/// DeepSeek R1 or generic; a Llama 3.x or generic reply holds one call, the generic one {"name",
/// "arguments"} bare): one call (or, with `parallel`, one or more) of `tools`
/// (OpenAI's list), or of the one named `only` when not empty, each call's arguments following
/// that function's `parameters` schema (sampling/json_schema_grammar.h). Errors: those of
/// json_schema_to_gbnf, naming the tool; kUnsupported for Mistral (its marker is a control token
/// the grammar cannot emit).
Expected<std::string> tool_call_gbnf(const nlohmann::ordered_json& tools, const std::string& only, bool parallel,
                                     ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace peregrine

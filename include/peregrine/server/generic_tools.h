// Tool calling for chat templates that render no tools (ToolCallFormat::kGeneric: Gemma,
// Phi-3.5, SmolLM2, stories260K's chatml, ...), the role llama.cpp's generic chat handler plays:
// the server describes the tools in the system message and asks for a reply that is one JSON
// object {"name", "arguments"} (which ToolCallParser reads, and tool_call_gbnf forces for
// tool_choice "required" / a named function); the conversation's calls and results, which such a
// template cannot show, are rewritten as plain turns.
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/tokenizer/chat_template.h"

namespace peregrine {

/// Where the tool instructions go: the system message, or (templates that refuse a system role,
/// such as Gemma 2's) the start of the first user message.
enum class ToolInstructions { kSystem, kFirstUser };

/// The calls the instructions ask for: kJson one {"name", "arguments"} object, the
/// conversation's calls and results rewritten as plain turns; kDeepSeekR1 its call blocks
/// (ToolCallFormat::kDeepSeekR1), calls and results left to its template, which shows them.
enum class ToolSyntax { kJson, kDeepSeekR1 };

/// `messages` as a template without tools renders them: with `tools` (OpenAI's list; null: no
/// tools shown), the instructions and one JSON line per function {name, description,
/// parameters} end the first system message (or a new one first), or with kFirstUser lead the
/// first user message; with kJson an assistant's tool_calls become JSON text {"name",
/// "arguments"} after its content, one line each, and consecutive "tool" messages one user
/// message ("Result of NAME: ..." per result, NAME the function its tool_call_id called).
std::vector<ChatMessage> generic_tool_messages(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools,
                                               ToolInstructions where = ToolInstructions::kSystem,
                                               ToolSyntax syntax = ToolSyntax::kJson);

}  // namespace peregrine

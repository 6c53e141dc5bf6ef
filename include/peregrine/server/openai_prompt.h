// The prompt token ids of an OpenAI request.
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/server/openai_request.h"
#include "peregrine/tokenizer/chat_template.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// Completions: a text prompt encoded with BOS when tokenizer.add_bos_default(), a token-id
/// prompt as given. Chat: chat_prompt_tokens (tokenizer/chat_prompt.h) of the messages, with
/// the tools unless tool_choice is "none"; for a template whose `tool_format` is kGeneric, the
/// messages of generic_tool_messages (server/generic_tools.h) instead. Errors: kInvalidArgument
/// from ChatTemplate::render (e.g. roles that do not alternate) or an empty result.
Expected<std::vector<std::int32_t>> prompt_tokens(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                  const ChatTemplate& chat_template, ToolCallFormat tool_format);

}  // namespace peregrine

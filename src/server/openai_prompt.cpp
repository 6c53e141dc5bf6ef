#include "peregrine/server/openai_prompt.h"

#include "peregrine/server/generic_tools.h"
#include "peregrine/tokenizer/chat_prompt.h"

namespace peregrine {

Expected<std::vector<std::int32_t>> prompt_tokens(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                  const ChatTemplate& chat_template, ToolCallFormat tool_format) {
  std::vector<std::int32_t> ids;
  if (request.endpoint == ApiEndpoint::kChatCompletions) {
    const nlohmann::ordered_json tools = request.tool_choice != ToolChoice::kNone ? request.tools : nlohmann::ordered_json();
    if (!template_shows_tools(chat_template.source(), tool_format)) {
      const ToolSyntax syntax = tool_format == ToolCallFormat::kDeepSeekR1 ? ToolSyntax::kDeepSeekR1 : ToolSyntax::kJson;
      auto in_system = chat_prompt_tokens(chat_template, generic_tool_messages(request.messages, tools, ToolInstructions::kSystem, syntax),
                                          tokenizer, nullptr, request.prompt_end);
      if (in_system || tools.is_null()) {
        PEREGRINE_ASSIGN_OR_RETURN(ids, std::move(in_system));
      } else {  // a template that refuses a system role (Gemma 2): the instructions lead the first user turn
        PEREGRINE_ASSIGN_OR_RETURN(ids, chat_prompt_tokens(chat_template, generic_tool_messages(request.messages, tools,
                                                                                                ToolInstructions::kFirstUser, syntax),
                                                           tokenizer, nullptr, request.prompt_end));
      }
    } else {
      PEREGRINE_ASSIGN_OR_RETURN(ids, chat_prompt_tokens(chat_template, request.messages, tokenizer, tools, request.prompt_end));
    }
  } else if (request.prompt_is_tokens) {
    ids = request.prompt_tokens;
  } else {
    ids = tokenizer.encode(request.prompt_text, tokenizer.add_bos_default());
  }
  if (ids.empty()) return invalid_argument("the prompt is empty (no tokens)");
  return ids;
}

}  // namespace peregrine

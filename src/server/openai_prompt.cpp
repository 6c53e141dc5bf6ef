#include "peregrine/server/openai_prompt.h"

#include "peregrine/tokenizer/chat_prompt.h"

namespace peregrine {

Expected<std::vector<std::int32_t>> prompt_tokens(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                  const ChatTemplate& chat_template) {
  std::vector<std::int32_t> ids;
  if (request.endpoint == ApiEndpoint::kChatCompletions) {
    const bool show_tools = request.tool_choice != ToolChoice::kNone;
    PEREGRINE_ASSIGN_OR_RETURN(ids, chat_prompt_tokens(chat_template, request.messages, tokenizer,
                                                       show_tools ? request.tools : nlohmann::ordered_json()));
  } else if (request.prompt_is_tokens) {
    ids = request.prompt_tokens;
  } else {
    ids = tokenizer.encode(request.prompt_text, tokenizer.add_bos_default());
  }
  if (ids.empty()) return invalid_argument("the prompt is empty (no tokens)");
  return ids;
}

}  // namespace peregrine

#include "peregrine/tokenizer/chat_prompt.h"

#include <algorithm>
#include <string_view>

namespace peregrine {

Expected<std::vector<std::int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template,
                                                       std::span<const ChatMessage> messages, const Tokenizer& tokenizer,
                                                       const nlohmann::ordered_json& tools, PromptEnd end) {
  ChatTemplateInputs inputs;
  inputs.add_generation_prompt = end == PromptEnd::kGenerationPrompt;
  inputs.tools = tools;
  inputs.bos_token = tokenizer.bos_id() >= 0 ? tokenizer.piece(tokenizer.bos_id()) : "";
  inputs.eos_token = tokenizer.eos_id() >= 0 ? tokenizer.piece(tokenizer.eos_id()) : "";
  PEREGRINE_ASSIGN_OR_RETURN(std::string text, chat_template.render(messages, inputs));
  if (end == PromptEnd::kContinueLastMessage) {
    const std::string& last = messages.empty() ? std::string() : messages.back().content;
    const std::size_t at = last.empty() ? std::string::npos : text.rfind(last);
    if (at == std::string::npos) {
      return invalid_argument("the last message cannot be continued: it is empty, or the chat template does not write its content as it is");
    }
    text.resize(at + last.size());
  }
  const bool leading_bos = !inputs.bos_token.empty() && std::string_view(text).starts_with(inputs.bos_token);
  const bool add_bos = !leading_bos && tokenizer.add_bos_default() && tokenizer.bos_id() >= 0;
  std::vector<std::int32_t> ids = tokenizer.encode(text, add_bos, ParseSpecial::kYes);
  if (ids.empty()) return invalid_argument("the chat prompt is empty (no tokens)");
  return ids;
}

std::vector<std::int32_t> end_of_turn_tokens(const Tokenizer& tokenizer) {
  static constexpr std::string_view kEndOfTurn[] = {"<|im_end|>", "<|eot_id|>",     "<end_of_turn>", "<|end|>",
                                                    "<|endoftext|>", "<｜end▁of▁sentence｜>", "<EOT>"};
  std::vector<std::int32_t> ids;
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  for (std::string_view piece : kEndOfTurn) {
    const std::vector<std::int32_t> one = tokenizer.encode(piece, false, ParseSpecial::kYes);
    if (one.size() == 1 && tokenizer.piece(one[0]) == piece && std::ranges::find(ids, one[0]) == ids.end()) {
      ids.push_back(one[0]);
    }
  }
  return ids;
}

}  // namespace peregrine

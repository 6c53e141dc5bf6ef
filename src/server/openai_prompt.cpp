#include "peregrine/server/openai_prompt.h"

namespace peregrine {
namespace {

std::string special_piece(const Tokenizer& tokenizer, std::int32_t id) { return id < 0 ? "" : tokenizer.piece(id); }

Expected<std::vector<std::int32_t>> chat_prompt(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                const ChatTemplate& chat_template) {
  ChatTemplateInputs inputs;
  inputs.add_generation_prompt = true;
  inputs.bos_token = special_piece(tokenizer, tokenizer.bos_id());
  inputs.eos_token = special_piece(tokenizer, tokenizer.eos_id());
  PEREGRINE_ASSIGN_OR_RETURN(std::string text, chat_template.render(request.messages, inputs));
  const bool has_bos = !inputs.bos_token.empty() && text.starts_with(inputs.bos_token);
  if (has_bos) {
    // encode() treats special-token text as plain text: put the BOS id back by hand.
    std::vector<std::int32_t> ids = tokenizer.encode(std::string_view(text).substr(inputs.bos_token.size()), false);
    ids.insert(ids.begin(), tokenizer.bos_id());
    return ids;
  }
  return tokenizer.encode(text, tokenizer.add_bos_default());
}

}  // namespace

Expected<std::vector<std::int32_t>> prompt_tokens(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                  const ChatTemplate& chat_template) {
  std::vector<std::int32_t> ids;
  if (request.endpoint == ApiEndpoint::kChatCompletions) {
    PEREGRINE_ASSIGN_OR_RETURN(ids, chat_prompt(request, tokenizer, chat_template));
  } else if (request.prompt_is_tokens) {
    ids = request.prompt_tokens;
  } else {
    ids = tokenizer.encode(request.prompt_text, tokenizer.add_bos_default());
  }
  if (ids.empty()) return invalid_argument("the prompt is empty (no tokens)");
  return ids;
}

}  // namespace peregrine

#include "peregrine/server/openai_prompt.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace peregrine {
namespace {

std::string special_piece(const Tokenizer& tokenizer, std::int32_t id) { return id < 0 ? "" : tokenizer.piece(id); }

/// Encodes `text` with every occurrence of the BOS / EOS piece turned into its id (encode()
/// spells special-token text as plain text); BOS first per add_bos_default() unless the text
/// starts with it.
std::vector<std::int32_t> encode_with_specials(std::string_view text, const Tokenizer& tokenizer,
                                               const ChatTemplateInputs& inputs) {
  const std::pair<std::string_view, std::int32_t> specials[] = {{inputs.bos_token, tokenizer.bos_id()},
                                                                {inputs.eos_token, tokenizer.eos_id()}};
  std::vector<std::int32_t> ids;
  const bool leading_bos = !inputs.bos_token.empty() && text.starts_with(inputs.bos_token);
  if (!leading_bos && tokenizer.add_bos_default() && tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
  while (!text.empty()) {
    std::size_t at = text.size(), len = 0;
    std::int32_t id = -1;
    for (const auto& [piece, piece_id] : specials) {
      const std::size_t pos = piece.empty() ? std::string_view::npos : text.find(piece);
      if (pos < at) at = pos, len = piece.size(), id = piece_id;
    }
    const std::vector<std::int32_t> plain = tokenizer.encode(text.substr(0, at), false);
    ids.insert(ids.end(), plain.begin(), plain.end());
    if (id >= 0) ids.push_back(id);
    text.remove_prefix(std::min(text.size(), at + len));
  }
  return ids;
}

Expected<std::vector<std::int32_t>> chat_prompt(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                const ChatTemplate& chat_template) {
  ChatTemplateInputs inputs;
  inputs.add_generation_prompt = true;
  inputs.bos_token = special_piece(tokenizer, tokenizer.bos_id());
  inputs.eos_token = special_piece(tokenizer, tokenizer.eos_id());
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, chat_template.render(request.messages, inputs));
  return encode_with_specials(text, tokenizer, inputs);
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

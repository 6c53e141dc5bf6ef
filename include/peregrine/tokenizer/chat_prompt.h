// A conversation → the prompt token ids a model expects, and the tokens that end its turn.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/chat_template.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// How a rendered prompt ends: with the template's generation prompt (a new assistant turn),
/// right after the last message, or inside the last message — an assistant prefill that the
/// reply continues (the text cut right after its content, as transformers' continue_final_message).
enum class PromptEnd { kGenerationPrompt, kAfterLastMessage, kContinueLastMessage };

/// `messages` rendered by `chat_template` (add_generation_prompt per `end`, the tokenizer's BOS / EOS
/// pieces as bos_token / eos_token), then encoded with ParseSpecial::kYes: every special
/// token's text (<|im_start|>, BOS, ...) becomes its id, as llama.cpp's server and llama-cli
/// do; BOS is prepended per add_bos_default() only when the text does not already start with
/// it (a template that writes bos_token gets exactly one). Errors: kInvalidArgument from
/// ChatTemplate::render (e.g. roles that do not alternate), a last message kContinueLastMessage
/// cannot continue (empty, or its content not in the rendered text as it is), or an empty result.
/// `tools` (OpenAI's list, or null) is the template's `tools` variable.
Expected<std::vector<std::int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template,
                                                       std::span<const ChatMessage> messages, const Tokenizer& tokenizer,
                                                       const nlohmann::ordered_json& tools = nullptr,
                                                       PromptEnd end = PromptEnd::kGenerationPrompt);

/// The tokens that end a reply: EOS and the vocabulary's end-of-turn tokens (<|im_end|>,
/// <|eot_id|>, <end_of_turn>, <|end|>, <|endoftext|>, <｜end▁of▁sentence｜>, <EOT>: llama.cpp's
/// end-of-generation set, llama-vocab.cpp), each once, where the vocabulary has them as one token.
std::vector<std::int32_t> end_of_turn_tokens(const Tokenizer& tokenizer);

}  // namespace peregrine

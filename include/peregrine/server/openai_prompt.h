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
/// prompt as given. Chat: the messages rendered by `chat_template` with add_generation_prompt
/// and the tokenizer's BOS / EOS pieces as bos_token / eos_token, then encoded with each BOS /
/// EOS piece in the text turned into its id (so a template that writes bos_token gets exactly
/// one BOS there); BOS is prepended per add_bos_default() only when the text does not start
/// with it. Other special-token text (<|im_start|>, ...) is encoded as plain text, as
/// Tokenizer::encode does. Errors: kInvalidArgument from ChatTemplate::render (e.g. roles that
/// do not alternate) or an empty result.
Expected<std::vector<std::int32_t>> prompt_tokens(const OpenAiRequest& request, const Tokenizer& tokenizer,
                                                  const ChatTemplate& chat_template);

}  // namespace peregrine

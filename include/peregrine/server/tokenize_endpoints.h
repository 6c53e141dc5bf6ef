// llama-server's /tokenize and /detokenize (tools/server/README.md of llama.cpp), which clients
// use to count and inspect tokens against the served model's own vocabulary.
#pragma once

#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "peregrine/server/api_error.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// POST /tokenize: {"content": string (required), "add_special": bool (default false: no BOS;
/// true: BOS when the vocabulary's config wants one), "parse_special": bool (default true:
/// control-token text becomes those tokens), "with_pieces": bool (default false)} →
/// {"tokens": [id, ...]}, or with pieces [{"id": id, "piece": text}, ...], where a piece is the
/// bytes the token adds to the text after the one before it (Tokenizer::decode_token), or the
/// list of those bytes when they are not valid UTF-8 (as llama-server does).
/// Errors: an ApiError 400 naming the field (malformed JSON, a missing or ill-typed field).
std::variant<nlohmann::json, ApiError> tokenize_response(std::string_view body, const Tokenizer& tokenizer);

/// POST /detokenize: {"tokens": [id, ...]} → {"content": text}. Errors: an ApiError 400 naming
/// "tokens" (missing, not a list of integers, an id outside [0, vocab_size)).
std::variant<nlohmann::json, ApiError> detokenize_response(std::string_view body, const Tokenizer& tokenizer);

}  // namespace peregrine

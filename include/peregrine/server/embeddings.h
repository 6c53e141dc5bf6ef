// OpenAI's embeddings API (https://platform.openai.com/docs/api-reference/embeddings/create):
// the request body parsed into the inputs to embed, the response body built from their pooled
// vectors (engine/pooling.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/server/api_error.h"

namespace peregrine {

/// The most inputs one request may carry (OpenAI's limit).
inline constexpr std::size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingsRequest {
  std::string model;                                    // "" when absent
  std::vector<std::string> texts;                       // "input" as text, one per item
  std::vector<std::vector<std::int32_t>> token_inputs;  // "input" as token ids, one list per item
  bool base64 = false;                                  // encoding_format "base64" (else "float")
};

/// Parses and validates a JSON body against a model of width `dim` and `vocab` tokens.
/// Errors: a 400 invalid_request_error naming the field: malformed JSON or a non-object body
/// (""), "input" missing, empty, an empty string or token list, more than kMaxEmbeddingInputs
/// items, text and token lists mixed, a token id outside the vocabulary; "encoding_format"
/// other than "float" / "base64"; "dimensions" other than `dim` (no truncation); "model" or
/// "user" not a string.
std::variant<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body, std::int64_t dim,
                                                                   std::int64_t vocab);

/// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [f32...] or, with
/// `base64`, the base64 (RFC 4648) of its little-endian f32 bytes}], "model", "usage":
/// {"prompt_tokens", "total_tokens"}}.
nlohmann::json embeddings_response_json(const std::string& model, const std::vector<std::vector<float>>& vectors,
                                        bool base64, std::int64_t prompt_tokens);

}  // namespace peregrine

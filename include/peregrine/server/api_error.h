// Errors of the OpenAI-compatible HTTP API: an HTTP status plus the OpenAI error object
// {"error": {"message", "type", "param", "code"}}
// (https://platform.openai.com/docs/guides/error-codes/api-errors).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "peregrine/core/status.h"

namespace peregrine {

/// One failed API call, as the client sees it.
struct ApiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "authentication_error", "rate_limit_error", "server_error"
  std::string message;
  std::string param;    // the request field at fault ("temperature", "messages[1].role"); "" = null
  std::string code;     // machine-readable detail ("model_not_found"); "" = null

  /// {"error": {"message", "type", "param", "code"}} with null for an empty param / code.
  nlohmann::json to_json() const;
};

/// The API error of a library Status: kInvalidArgument and kOutOfRange → 400
/// invalid_request_error (kOutOfRange with code "context_length_exceeded"), kNotFound → 404,
/// kResourceExhausted → 429 rate_limit_error (code "queue_full"), kUnavailable and kCancelled
/// → 503 server_error, anything else → 500 server_error. `param` names the request field.
ApiError api_error(const Status& status, std::string param = {});

/// 400 invalid_request_error about the request field `param`: "'<param>' <problem>".
ApiError invalid_param(std::string_view param, std::string_view problem);

/// 401 authentication_error (code "invalid_api_key"): a missing or wrong key (bearer token or x-api-key).
ApiError unauthorized_error();
/// 404 invalid_request_error (code "model_not_found") for a `model` other than the served one.
ApiError model_not_found_error(const std::string& model);
/// The error body for a status httplib produced on its own (unknown route 404, body too large
/// 413, malformed HTTP 400, ...): invalid_request_error below 500, else server_error.
ApiError http_error(int http_status);

}  // namespace peregrine

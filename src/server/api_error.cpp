#include "peregrine/server/api_error.h"

#include <utility>

namespace peregrine {
namespace {

nlohmann::json string_or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

nlohmann::json ApiError::to_json() const {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", string_or_null(param)}, {"code", string_or_null(code)}}}};
}

ApiError api_error(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
      e.http_status = 400;
      e.type = "invalid_request_error";
      break;
    case ErrorCode::kOutOfRange:
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "context_length_exceeded";
      break;
    case ErrorCode::kNotFound:
      e.http_status = 404;
      e.type = "invalid_request_error";
      e.code = "not_found";
      break;
    case ErrorCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case ErrorCode::kUnavailable:
    case ErrorCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "unavailable";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

ApiError unauthorized_error() {
  return {401, "authentication_error",
          "Incorrect or missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'", "",
          "invalid_api_key"};
}

ApiError model_not_found_error(const std::string& model) {
  return {404, "invalid_request_error", "The model '" + model + "' does not exist", "model", "model_not_found"};
}

ApiError invalid_param(std::string_view param, std::string_view problem) {
  std::string message;
  message.append("'").append(param).append("' ").append(problem);
  return api_error(invalid_argument(std::move(message)), std::string(param));
}

ApiError http_error(int http_status) {
  ApiError e;
  e.http_status = http_status;
  e.type = http_status < 500 ? "invalid_request_error" : "server_error";
  switch (http_status) {
    case 404:
      e.message = "Unknown route";
      e.code = "not_found";
      break;
    case 413:
      e.message = "Request body too large";
      e.code = "request_too_large";
      break;
    default:
      e.message = "HTTP error " + std::to_string(http_status);
      break;
  }
  return e;
}

}  // namespace peregrine

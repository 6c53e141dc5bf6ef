// Errors as values: Status and Expected<T>.
//
// Every fallible library function returns Status (no value) or Expected<T>. The CLI turns an
// error into one line on stderr and a non-zero exit; the server into an OpenAI-style
// JSON error. Nothing in the library throws across its public API.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace peregrine {

/// Error categories; the CLI/server map them to exit codes / HTTP statuses.
enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad parameter value (negative temperature, -t 0, ...)
  kNotFound,         // missing file or tensor
  kIoError,          // open/read/mmap failed
  kCorruptFile,      // truncated file, bad magic, offsets past the end, absurd counts
  kUnsupported,      // valid file but a dtype/architecture/version we do not handle
  kOutOfRange,       // prompt longer than the context, token id past the vocabulary
  kResourceExhausted,  // no free KV blocks, request queue full (HTTP 429)
  kUnavailable,        // the engine is shutting down (HTTP 503)
  kCancelled,          // the request was cancelled (client disconnect, stop)
  kInternal,
};

/// Human-readable name of an error code ("invalid argument", "corrupt file", ...).
const char* error_code_name(ErrorCode code);

/// Success or an error with a one-line, user-facing message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
inline Status corrupt_file(std::string m) { return {ErrorCode::kCorruptFile, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status out_of_range(std::string m) { return {ErrorCode::kOutOfRange, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {ErrorCode::kResourceExhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status cancelled(std::string m) { return {ErrorCode::kCancelled, std::move(m)}; }

/// A value of type T or an error Status (a small stand-in for C++23 std::expected).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Expected(Status error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool has_value() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  /// The error; only valid when !has_value().
  const Status& status() const { return std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace peregrine

/// Propagate an error Status from an expression returning Status.
#define PEREGRINE_RETURN_IF_ERROR(expr)          \
  do {                                           \
    ::peregrine::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;                \
  } while (0)

#define PEREGRINE_CONCAT_INNER(a, b) a##b
#define PEREGRINE_CONCAT(a, b) PEREGRINE_CONCAT_INNER(a, b)
/// `PEREGRINE_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define PEREGRINE_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto PEREGRINE_CONCAT(_exp_, __LINE__) = (expr);                         \
  if (!PEREGRINE_CONCAT(_exp_, __LINE__)) return PEREGRINE_CONCAT(_exp_, __LINE__).status(); \
  lhs = std::move(PEREGRINE_CONCAT(_exp_, __LINE__)).value()

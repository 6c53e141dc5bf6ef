// Strict JSON helpers for untrusted input (safetensors headers, HF config.json, tokenizer.json,
// tokenizer_config.json). Needs nlohmann/json (RFC 8259) on the include path: library-internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "peregrine/core/status.h"

namespace peregrine::json_util {

/// Parses untrusted `text` as one JSON value without throwing. Rejects malformed JSON, invalid
/// UTF-8, duplicate keys in any object (nlohmann would silently keep one of them), and nesting
/// deeper than `max_depth`. Errors: kCorruptFile "<what>: <reason>".
Expected<nlohmann::json> parse(std::string_view text, const std::string& what, int max_depth = 64);

/// `s` made safe for a one-line message: control and non-ASCII bytes become '?', and it is cut
/// to `max_len` bytes (with "...").
std::string printable(std::string_view s, std::size_t max_len = 80);

/// The JSON type name of `j` for messages ("object", "string", "number", ...).
std::string type_name(const nlohmann::json& j);

/// `j` as a non-negative integer that fits in u64, or nullopt (floats, negatives, other types).
std::optional<std::uint64_t> as_u64(const nlohmann::json& j);

/// `j` as a signed integer that fits in i64, or nullopt (floats, out of range, other types).
std::optional<std::int64_t> as_i64(const nlohmann::json& j);

}  // namespace peregrine::json_util

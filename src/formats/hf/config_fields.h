// Typed access to the fields of a JSON object read from a model folder (config.json,
// quantize_config.json): every error names the file and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "peregrine/core/json_util.h"

namespace peregrine {

/// Parses the JSON file at `path` (json_util::parse's strict rules).
/// Errors: those of MappedFile::open and json_util::parse.
Expected<nlohmann::json> read_json_file(const std::string& path);

class ConfigFields {
 public:
  /// `j` must outlive the object; `what` names it in messages ("dir/config.json").
  ConfigFields(const nlohmann::json& j, std::string what) : j_(j), what_(std::move(what)) {}

  /// The field, or nullptr when absent or null (HF writes null for "use the default").
  const nlohmann::json* get(const char* key) const;

  /// Errors: kCorruptFile (missing, or not an integer).
  Expected<std::int64_t> required_int(const char* key) const;
  /// nullopt when absent. Errors: kCorruptFile (not an integer).
  Expected<std::optional<std::int64_t>> optional_int(const char* key) const;
  /// A number that fits in a float; nullopt when absent. Errors: kCorruptFile.
  Expected<std::optional<float>> optional_float(const char* key) const;
  /// A list of numbers that each fit in a float. Errors: kCorruptFile (missing, not a list,
  /// an element not such a number).
  Expected<std::vector<float>> required_float_list(const char* key) const;
  /// nullopt when absent. Errors: kCorruptFile (not true/false).
  Expected<std::optional<bool>> optional_bool(const char* key) const;
  /// nullopt when absent. Errors: kCorruptFile (not a string).
  Expected<std::optional<std::string>> optional_string(const char* key) const;

  const std::string& what() const { return what_; }

 private:
  Expected<std::int64_t> to_int(const char* key, const nlohmann::json& v) const;
  Expected<float> to_float(const char* key, const nlohmann::json& v) const;
  Status ill_typed(const char* key, const nlohmann::json& v, const char* expected) const;

  const nlohmann::json& j_;
  std::string what_;
};

}  // namespace peregrine

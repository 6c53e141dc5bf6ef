#include "formats/hf/config_fields.h"

#include <cmath>
#include <limits>

#include "peregrine/core/mapped_file.h"

namespace peregrine {

using nlohmann::json;

Expected<json> read_json_file(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const auto bytes = file->bytes();
  return json_util::parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

const json* ConfigFields::get(const char* key) const {
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

Expected<std::int64_t> ConfigFields::required_int(const char* key) const {
  const json* v = get(key);
  if (!v) return corrupt_file(what_ + ": required field '" + key + "' is missing");
  return to_int(key, *v);
}

Expected<std::optional<std::int64_t>> ConfigFields::optional_int(const char* key) const {
  const json* v = get(key);
  if (!v) return std::optional<std::int64_t>();
  PEREGRINE_ASSIGN_OR_RETURN(auto i, to_int(key, *v));
  return std::optional<std::int64_t>(i);
}

Expected<std::optional<float>> ConfigFields::optional_float(const char* key) const {
  const json* v = get(key);
  if (!v) return std::optional<float>();
  PEREGRINE_ASSIGN_OR_RETURN(const float f, to_float(key, *v));
  return std::optional<float>(f);
}

Expected<std::vector<float>> ConfigFields::required_float_list(const char* key) const {
  const json* v = get(key);
  if (!v) return corrupt_file(what_ + ": required field '" + key + "' is missing");
  if (!v->is_array()) return ill_typed(key, *v, "a list of numbers");
  std::vector<float> out;
  out.reserve(v->size());
  for (const json& e : *v) {
    PEREGRINE_ASSIGN_OR_RETURN(const float f, to_float(key, e));
    out.push_back(f);
  }
  return out;
}

Expected<std::optional<bool>> ConfigFields::optional_bool(const char* key) const {
  const json* v = get(key);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) return ill_typed(key, *v, "true or false");
  return std::optional<bool>(v->get<bool>());
}

Expected<std::optional<std::string>> ConfigFields::optional_string(const char* key) const {
  const json* v = get(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return ill_typed(key, *v, "a string");
  return std::optional<std::string>(v->get<std::string>());
}

Expected<std::int64_t> ConfigFields::to_int(const char* key, const json& v) const {
  auto i = json_util::as_i64(v);
  if (!i) return ill_typed(key, v, "an integer");
  return *i;
}

Expected<float> ConfigFields::to_float(const char* key, const json& v) const {
  if (!v.is_number()) return ill_typed(key, v, "a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
    return corrupt_file(what_ + ": field '" + key + "' = " + json_util::printable(v.dump(), 40) + " is out of range");
  }
  return static_cast<float>(d);
}

Status ConfigFields::ill_typed(const char* key, const json& v, const char* expected) const {
  return corrupt_file(what_ + ": field '" + key + "' is " +
                      (v.is_number() ? std::string("the number ") + json_util::printable(v.dump(), 40)
                                     : "a " + json_util::type_name(v)) +
                      ", expected " + expected);
}

}  // namespace peregrine

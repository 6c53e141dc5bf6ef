// Helpers the request converters share (anthropic_messages.cpp, responses_api.cpp).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "peregrine/server/api_error.h"

namespace peregrine::request_fields {

/// The converters read and write ordered JSON: schemas keep their key order.
using Json = nlohmann::ordered_json;
/// A conversion step's failure (nullopt: none).
using Error = std::optional<ApiError>;

/// obj[key], or nullptr when absent or null.
template <class J>
const J* field(const J& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

/// The parts concatenated (GCC 12's -Wstringop-overflow misfires on chains of std::string +).
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

/// The text of `content`: a string, or an array of parts {"type": one of `text_types`, "text":
/// string} joined by `sep`. A part whose type is one of `image_types` is a 400 "image input is
/// not supported", any other part a 400 naming it (`at`[j]).
template <class J>
std::optional<ApiError> joined_text(const J& content, const std::string& at, std::string_view sep,
                                    std::initializer_list<std::string_view> text_types,
                                    std::initializer_list<std::string_view> image_types, std::string& out) {
  if (content.is_string()) {
    out = content.template get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return invalid_param(at, "must be a string or an array of text parts");
  const auto among = [](std::string_view t, std::initializer_list<std::string_view> types) {
    for (std::string_view x : types) {
      if (t == x) return true;
    }
    return false;
  };
  for (std::size_t j = 0; j < content.size(); ++j) {
    const J& part = content[j];
    const J* type = part.is_object() ? field(part, "type") : nullptr;
    const J* text = part.is_object() ? field(part, "text") : nullptr;
    const std::string t = type != nullptr && type->is_string() ? type->template get<std::string>() : "";
    const std::string where = cat({at, "[", std::to_string(j), "]"});
    if (among(t, image_types)) {
      return invalid_param(where + ".type", cat({"'", t, "': image input is not supported (the model reads text only)"}));
    }
    if (!among(t, text_types) || text == nullptr || !text->is_string()) {
      return invalid_param(where, cat({"must be a text part {\"type\": \"", *text_types.begin(), "\", \"text\": string}"}));
    }
    if (!out.empty()) out += sep;
    out += text->template get<std::string>();
  }
  return std::nullopt;
}

/// out["tools"]: body["tools"] (when present) as chat function tools, each entry's function
/// ({"name", "description"?, "parameters"?}) made by `one(entry, "tools[i]")`, which returns it or
/// the ApiError of an entry it does not take.
template <class J, class One>
std::optional<ApiError> chat_tools(const J& body, J& out, One one) {
  const J* list = field(body, "tools");
  if (list == nullptr) return std::nullopt;
  if (!list->is_array()) return invalid_param("tools", "must be an array");
  J functions = J::array();
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::variant<J, ApiError> fn = one((*list)[i], cat({"tools[", std::to_string(i), "]"}));
    if (const ApiError* e = std::get_if<ApiError>(&fn)) return *e;
    functions.push_back({{"type", "function"}, {"function", std::move(std::get<J>(fn))}});
  }
  if (!functions.empty()) out["tools"] = std::move(functions);
  return std::nullopt;
}

}  // namespace peregrine::request_fields

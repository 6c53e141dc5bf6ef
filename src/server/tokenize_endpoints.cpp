#include "peregrine/server/tokenize_endpoints.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/core/json_util.h"
#include "peregrine/tokenizer/utf8.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

/// The body's JSON object handed to `handle`. Errors: malformed JSON, not an object.
std::variant<Json, ApiError> with_object(std::string_view body, const Tokenizer& tokenizer,
                                         std::variant<Json, ApiError> (*handle)(const Json&, const Tokenizer&)) {
  auto parsed = json_util::parse(body, "request body");
  if (!parsed) return api_error(invalid_argument(parsed.status().message()));
  if (!parsed->is_object()) return api_error(invalid_argument("the request body must be a JSON object"));
  return handle(*parsed, tokenizer);
}

/// Reads the boolean field `key` of `obj` into `out`, left as it is when absent or null.
std::optional<ApiError> read_flag(const Json& obj, const char* key, bool& out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return invalid_param(key, "must be a boolean (got " + json_util::type_name(*it) + ")");
  out = it->get<bool>();
  return std::nullopt;
}

bool valid_utf8(std::string_view s) {
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t len = utf8_char_length(s, pos);
    if (len == 1 && static_cast<unsigned char>(s[pos]) >= 0x80) return false;
    pos += len;
  }
  return true;
}

Json piece_json(const std::string& bytes) {
  if (valid_utf8(bytes)) return bytes;
  Json list = Json::array();
  for (const char c : bytes) list.push_back(static_cast<unsigned char>(c));
  return list;
}

std::variant<Json, ApiError> tokenize(const Json& obj, const Tokenizer& tokenizer) {
  const auto content = obj.find("content");
  if (content == obj.end() || !content->is_string()) return invalid_param("content", "must be a string");
  bool add_special = false, parse_special = true, with_pieces = false;
  for (const auto& [key, out] : {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special},
                                 std::pair{"with_pieces", &with_pieces}}) {
    if (auto e = read_flag(obj, key, *out)) return *e;
  }
  const std::vector<std::int32_t> ids = tokenizer.encode(content->get_ref<const std::string&>(), add_special && tokenizer.add_bos_default(),
                                                         parse_special ? ParseSpecial::kYes : ParseSpecial::kNo);
  if (!with_pieces) return Json{{"tokens", ids}};
  Json tokens = Json::array();
  std::int32_t prev = -1;
  for (const std::int32_t id : ids) {
    tokens.push_back({{"id", id}, {"piece", piece_json(tokenizer.decode_token(prev, id))}});
    prev = id;
  }
  return Json{{"tokens", tokens}};
}

std::variant<Json, ApiError> detokenize(const Json& obj, const Tokenizer& tokenizer) {
  const auto tokens = obj.find("tokens");
  if (tokens == obj.end() || !tokens->is_array()) return invalid_param("tokens", "must be an array of token ids");
  std::vector<std::int32_t> ids;
  for (const Json& t : *tokens) {
    const std::optional<std::int64_t> id = json_util::as_i64(t);
    if (!id) return invalid_param("tokens", "must be an array of token ids (got " + json_util::type_name(t) + ")");
    if (*id < 0 || *id >= tokenizer.vocab_size()) {
      return invalid_param("tokens", "token id " + std::to_string(*id) + " is outside the vocabulary [0, " +
                               std::to_string(tokenizer.vocab_size()) + ")");
    }
    ids.push_back(static_cast<std::int32_t>(*id));
  }
  return Json{{"content", tokenizer.decode(ids)}};
}

}  // namespace

std::variant<Json, ApiError> tokenize_response(std::string_view body, const Tokenizer& tokenizer) {
  return with_object(body, tokenizer, tokenize);
}

std::variant<Json, ApiError> detokenize_response(std::string_view body, const Tokenizer& tokenizer) {
  return with_object(body, tokenizer, detokenize);
}

}  // namespace peregrine

#include "peregrine/server/embeddings.h"

#include <bit>
#include <cstring>

#include "peregrine/core/json_util.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;

// One token-id list; false when an entry is not a token id below `vocab`.
bool read_tokens(const Json& list, std::int64_t vocab, std::vector<std::int32_t>& out) {
  for (const Json& t : list) {
    const auto id = json_util::as_i64(t);
    if (!id || *id < 0 || *id >= vocab) return false;
    out.push_back(static_cast<std::int32_t>(*id));
  }
  return !out.empty();
}

// "input": a string, an array of strings, an array of token ids, or an array of such arrays.
std::optional<ApiError> read_input(const Json& obj, std::int64_t vocab, EmbeddingsRequest& r) {
  const auto it = obj.find("input");
  if (it == obj.end() || it->is_null()) return invalid_param("input", "is required");
  const Json& in = *it;
  if (in.is_string()) {
    r.texts.push_back(in.get<std::string>());
  } else if (!in.is_array() || in.empty()) {
    return invalid_param("input", "must be a string, an array of strings, an array of token ids or an array of such arrays");
  } else if (in.size() > kMaxEmbeddingInputs) {
    return invalid_param("input", std::string("has more than ").append(std::to_string(kMaxEmbeddingInputs)).append(" items"));
  } else if (in[0].is_number()) {
    r.token_inputs.emplace_back();
    if (!read_tokens(in, vocab, r.token_inputs.back())) return invalid_param("input", "holds an entry that is not a token id of this model");
  } else {
    for (const Json& item : in) {
      if (item.is_string() && r.token_inputs.empty()) {
        r.texts.push_back(item.get<std::string>());
      } else if (item.is_array() && r.texts.empty()) {
        r.token_inputs.emplace_back();
        if (!read_tokens(item, vocab, r.token_inputs.back())) return invalid_param("input", "holds an empty list or an entry that is not a token id of this model");
      } else {
        return invalid_param("input", "must be all strings or all token-id lists");
      }
    }
  }
  for (const std::string& t : r.texts) {
    if (t.empty()) return invalid_param("input", "holds an empty string");
  }
  return std::nullopt;
}

std::optional<ApiError> read_options(const Json& obj, std::int64_t dim, EmbeddingsRequest& r) {
  for (const char* key : {"model", "user"}) {
    const auto it = obj.find(key);
    if (it != obj.end() && !it->is_null() && !it->is_string()) return invalid_param(key, "must be a string");
  }
  if (const auto it = obj.find("model"); it != obj.end() && it->is_string()) r.model = it->get<std::string>();
  if (const auto it = obj.find("encoding_format"); it != obj.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64")) return invalid_param("encoding_format", "must be \"float\" or \"base64\"");
    r.base64 = *it == "base64";
  }
  if (const auto it = obj.find("dimensions"); it != obj.end() && !it->is_null()) {
    const auto d = json_util::as_i64(*it);
    if (!d || *d != dim) {
      return invalid_param("dimensions", std::string("must be this model's width, ").append(std::to_string(dim)).append(" (no truncation)"));
    }
  }
  return std::nullopt;
}

// RFC 4648 base64 of `bytes`.
std::string base64(std::string_view bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (std::size_t k = 0; k < 4; ++k) out += k <= n ? kDigits[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// The little-endian bytes of `v`.
std::string f32_bytes(const std::vector<float>& v) {
  static_assert(std::endian::native == std::endian::little, "embeddings are sent as little-endian f32");
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

}  // namespace

std::variant<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body, std::int64_t dim,
                                                                   std::int64_t vocab) {
  auto parsed = json_util::parse(body, "request body");
  if (!parsed) return api_error(invalid_argument(parsed.status().message()));
  if (!parsed->is_object()) return api_error(invalid_argument("the request body must be a JSON object"));
  EmbeddingsRequest r;
  if (auto e = read_input(*parsed, vocab, r)) return *e;
  if (auto e = read_options(*parsed, dim, r)) return *e;
  return r;
}

Json embeddings_response_json(const std::string& model, const std::vector<std::vector<float>>& vectors, bool base64_encoded,
                              std::int64_t prompt_tokens) {
  Json data = Json::array();
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    Json embedding = base64_encoded ? Json(base64(f32_bytes(vectors[i]))) : Json(vectors[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return {{"object", "list"}, {"data", std::move(data)}, {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace peregrine

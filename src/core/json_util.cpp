#include "peregrine/core/json_util.h"

#include <exception>
#include <limits>
#include <set>
#include <vector>

namespace peregrine::json_util {
namespace {

/// nlohmann's messages start with "[json.exception.parse_error.101] "; drop that and any
/// non-printable bytes it echoes from the input ("last read: ...").
std::string clean_message(const char* what) {
  std::string_view s(what);
  if (!s.empty() && s[0] == '[') {
    if (auto close = s.find("] "); close != std::string_view::npos) s.remove_prefix(close + 2);
  }
  return printable(s, 200);
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_len) {
  std::string out(s.substr(0, max_len));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  if (s.size() > max_len) out += "...";
  return out;
}

Expected<nlohmann::json> parse(std::string_view text, const std::string& what, int max_depth) {
  // The callback sees every key of every object: keep one key set per open object.
  std::vector<std::set<std::string>> open_objects;
  int depth = 0;
  std::string problem;
  auto cb = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        if (++depth > max_depth && problem.empty()) {
          problem = "JSON nested deeper than " + std::to_string(max_depth) + " levels";
        }
        if (event == E::object_start) open_objects.emplace_back();
        break;
      case E::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        --depth;
        break;
      case E::array_end:
        --depth;
        break;
      case E::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get_ref<const std::string&>()).second &&
            problem.empty()) {
          problem = "duplicate JSON key \"" + printable(parsed.get_ref<const std::string&>()) + "\"";
        }
        break;
      case E::value:
        break;
    }
    return true;
  };
  try {
    nlohmann::json j = nlohmann::json::parse(text.data(), text.data() + text.size(), cb,
                                             /*allow_exceptions=*/true);
    if (!problem.empty()) return corrupt_file(what + ": " + problem);
    return j;
  } catch (const nlohmann::json::exception& e) {
    return corrupt_file(what + ": malformed JSON (" + clean_message(e.what()) + ")");
  } catch (const std::exception& e) {  // e.g. std::bad_alloc on an absurd header
    return corrupt_file(what + ": cannot parse JSON (" + clean_message(e.what()) + ")");
  }
}

std::string type_name(const nlohmann::json& j) {
  if (j.is_number()) return "number";
  return j.type_name();
}

std::optional<std::uint64_t> as_u64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v >= 0) return static_cast<std::uint64_t>(v);
  }
  return std::nullopt;
}

std::optional<std::int64_t> as_i64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return static_cast<std::int64_t>(v);
    return std::nullopt;
  }
  if (j.is_number_integer()) return j.get<std::int64_t>();
  return std::nullopt;
}

}  // namespace peregrine::json_util

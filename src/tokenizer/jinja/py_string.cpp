#include "tokenizer/jinja/py_string.h"

#include <algorithm>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine::jinja {
namespace {

std::uint32_t code_point(std::string_view ch) { return utf8_decode(ch, 0, ch.size()); }

bool is_ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char to_upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_space_char(std::string_view ch) { return py_isspace(code_point(ch)); }

std::vector<std::string> split_whitespace(std::string_view s, std::int64_t maxsplit) {
  std::vector<std::string> out;
  const auto chars = py_chars(s);
  std::size_t i = 0;
  while (i < chars.size()) {
    while (i < chars.size() && is_space_char(chars[i])) ++i;
    if (i == chars.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      for (; i < chars.size(); ++i) word += chars[i];
      out.push_back(py_strip(word, std::nullopt, false, true));
      break;
    }
    for (; i < chars.size() && !is_space_char(chars[i]); ++i) word += chars[i];
    out.push_back(std::move(word));
  }
  return out;
}

}  // namespace

std::vector<std::string> py_chars(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t len = utf8_char_length(s, pos);
    out.emplace_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

std::int64_t py_len(std::string_view s) {
  std::int64_t n = 0;
  for (std::size_t pos = 0; pos < s.size(); pos += utf8_char_length(s, pos)) ++n;
  return n;
}

bool py_isspace(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const auto cs = py_chars(s);
  const auto set = chars ? py_chars(*chars) : std::vector<std::string>{};
  const auto strippable = [&](const std::string& ch) {
    return chars ? std::find(set.begin(), set.end(), ch) != set.end() : is_space_char(ch);
  };
  std::size_t begin = 0, end = cs.size();
  while (left && begin < end && strippable(cs[begin])) ++begin;
  while (right && end > begin && strippable(cs[end - 1])) --end;
  std::string out;
  for (std::size_t i = begin; i < end; ++i) out += cs[i];
  return out;
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit);
  std::vector<std::string> out;
  std::size_t start = 0;
  while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
    const std::size_t hit = s.find(*sep, start);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(start, hit - start));
    start = hit + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  std::string out;
  std::int64_t done = 0;
  if (old.empty()) {
    for (const auto& ch : py_chars(s)) {
      if (count < 0 || done++ < count) out += repl;
      out += ch;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  std::size_t start = 0;
  while (count < 0 || done < count) {
    const std::size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(start, hit - start));
    out.append(repl);
    start = hit + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_upper);
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    c = prev_letter ? to_lower(c) : to_upper(c);
    prev_letter = is_ascii_alpha(c);
  }
  return out;
}

}  // namespace peregrine::jinja

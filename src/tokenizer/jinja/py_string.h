// Python str methods over UTF-8 text, by code point as Python counts them (len, indexing,
// strip, split). Case mapping is ASCII-only (other letters are left as they are).
// Spec: https://docs.python.org/3/library/stdtypes.html#string-methods
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::jinja {

/// The characters (code points, each as its UTF-8 bytes) of `s`; invalid bytes count as one each.
std::vector<std::string> py_chars(std::string_view s);
/// len(s): the number of code points.
std::int64_t py_len(std::string_view s);
/// str.isspace() of one code point (ASCII whitespace, \x1c-\x1f, \x85, \xa0, Unicode spaces).
bool py_isspace(std::uint32_t cp);
/// str.strip / lstrip / rstrip: `chars` (a set of code points) or whitespace when nullopt.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
/// str.split(sep, maxsplit): whitespace runs when `sep` is nullopt; maxsplit < 0 is unlimited.
/// Requires a non-empty `sep`.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
/// str.replace(old, new, count): count < 0 replaces all; an empty `old` inserts `new` between characters.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
/// str.capitalize(): first character upper, the rest lower.
std::string py_capitalize(std::string_view s);
/// str.title(): each run of letters starts upper, continues lower.
std::string py_title(std::string_view s);

}  // namespace peregrine::jinja

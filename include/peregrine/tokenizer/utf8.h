// Small UTF-8 helpers shared by the tokenizers (RFC 3629).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine {

/// Byte length of the UTF-8 character that starts at `text[pos]` (1..4), checked against the
/// continuation bytes actually present. Invalid or truncated sequences count as 1 byte, so
/// every byte string splits into "characters" and no byte is ever lost.
/// Precondition: pos < text.size().
std::size_t utf8_char_length(std::string_view text, std::size_t pos);

/// Splits `text` into characters as utf8_char_length defines them; returns each character's
/// byte length in order (their sum is text.size()).
std::vector<std::uint32_t> utf8_char_lengths(std::string_view text);

/// Decodes the code point of a valid character of length `len` at `text[pos]`, or the single
/// byte's value for an invalid 1-byte "character".
std::uint32_t utf8_decode(std::string_view text, std::size_t pos, std::size_t len);

/// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF) to `out`.
void utf8_append(std::uint32_t cp, std::string& out);

/// Replaces every occurrence of `from` in `text` by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace peregrine

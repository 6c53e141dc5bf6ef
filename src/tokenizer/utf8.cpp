#include "peregrine/tokenizer/utf8.h"

namespace peregrine {
namespace {

// Expected total length of a sequence from its lead byte; 0 for a byte that cannot start one.
std::size_t lead_length(std::uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

bool is_continuation(std::uint8_t b) { return (b & 0xC0) == 0x80; }

// RFC 3629 table 3-7: the second byte of E0/ED/F0/F4 sequences has a narrower range
// (no overlong forms, no surrogates, nothing above U+10FFFF).
bool second_byte_ok(std::uint8_t lead, std::uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0;
    case 0xED: return b <= 0x9F;
    case 0xF0: return b >= 0x90;
    case 0xF4: return b <= 0x8F;
    default: return true;
  }
}

}  // namespace

std::size_t utf8_char_length(std::string_view text, std::size_t pos) {
  const std::size_t n = lead_length(static_cast<std::uint8_t>(text[pos]));
  if (n <= 1 || pos + n > text.size()) return 1;
  const auto lead = static_cast<std::uint8_t>(text[pos]);
  if (!second_byte_ok(lead, static_cast<std::uint8_t>(text[pos + 1]))) return 1;
  for (std::size_t i = 1; i < n; ++i) {
    if (!is_continuation(static_cast<std::uint8_t>(text[pos + i]))) return 1;
  }
  return n;
}

std::vector<std::uint32_t> utf8_char_lengths(std::string_view text) {
  std::vector<std::uint32_t> out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t len = utf8_char_length(text, pos);
    out.push_back(static_cast<std::uint32_t>(len));
    pos += len;
  }
  return out;
}

std::uint32_t utf8_decode(std::string_view text, std::size_t pos, std::size_t len) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<std::uint8_t>(text[pos + i])); };
  switch (len) {
    case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    case 4:
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
             (byte(3) & 0x3F);
    default: return byte(0);
  }
}

void utf8_append(std::uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = from.empty() ? std::string_view::npos : text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace peregrine

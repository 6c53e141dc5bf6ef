#include "peregrine/tokenizer/byte_level.h"

#include <array>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {
namespace {

bool maps_to_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<std::uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8{};
  std::array<int, 512> to_byte{};  // every mapped code point is < 0x100 + 68
};

Tables build_tables() {
  Tables t;
  t.to_byte.fill(-1);
  std::uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const std::uint32_t cp = maps_to_itself(b) ? static_cast<std::uint32_t>(b) : next++;
    t.to_cp[static_cast<std::size_t>(b)] = cp;
    utf8_append(cp, t.to_utf8[static_cast<std::size_t>(b)]);
    t.to_byte[cp] = b;
  }
  return t;
}

const Tables& tables() {
  static const Tables t = build_tables();
  return t;
}

}  // namespace

std::uint32_t byte_to_codepoint(std::uint8_t byte) { return tables().to_cp[byte]; }

int codepoint_to_byte(std::uint32_t cp) { return cp < 512 ? tables().to_byte[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_utf8[static_cast<std::uint8_t>(c)];
  return out;
}

std::string byte_level_decode(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (std::size_t pos = 0; pos < piece.size();) {
    const std::size_t len = utf8_char_length(piece, pos);
    const int b = len == 1 && static_cast<std::uint8_t>(piece[pos]) >= 0x80
                      ? -1
                      : codepoint_to_byte(utf8_decode(piece, pos, len));
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(piece.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

}  // namespace peregrine

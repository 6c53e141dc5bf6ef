#include "spm_piece.h"

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {

std::string spm_decode_piece(std::string_view piece, TokenType type, bool drop_leading_space) {
  switch (type) {
    case TokenType::kControl: return "";
    case TokenType::kUnknown: return std::string(kSpmUnknownSurface);
    case TokenType::kUserDefined: return std::string(piece);
    case TokenType::kByte:
      if (auto b = parse_byte_piece(piece)) return std::string(1, static_cast<char>(*b));
      return std::string(piece);
    case TokenType::kNormal:
    case TokenType::kUnused: break;
  }
  std::string text = replace_all(piece, kSpmSpace, " ");
  if (drop_leading_space && !text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

}  // namespace peregrine

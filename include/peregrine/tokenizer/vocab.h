// A tokenizer vocabulary: pieces, scores, token types and the special ids.
//
// Token types follow GGUF's tokenizer.ggml.token_type (= SentencePiece's ModelProto piece
// types + 1): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

enum class TokenType : std::uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

/// Hash that lets unordered_map<std::string, ...> be queried with a string_view (no copy).
struct StringViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Pieces indexed by id, plus the reverse map. Build with `finalize()` after filling the arrays.
struct Vocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;      // SentencePiece log-probabilities (0 when absent)
  std::vector<TokenType> types;
  std::int32_t bos_id = -1;
  std::int32_t eos_id = -1;
  std::int32_t unk_id = -1;

  /// Validates the arrays (equal lengths, not empty, special ids inside the vocabulary) and
  /// builds the piece → id index (the first id wins for duplicated pieces) and the byte-token
  /// table. Errors: kCorruptFile naming `what`.
  Status finalize(const std::string& what);

  /// Number of tokens.
  std::int32_t size() const { return static_cast<std::int32_t>(pieces.size()); }
  /// Whether 0 <= id < size().
  bool valid_id(std::int32_t id) const { return id >= 0 && id < size(); }
  /// Type of a token; `id` must be valid_id().
  TokenType type(std::int32_t id) const { return types[static_cast<std::size_t>(id)]; }
  /// Piece (UTF-8 bytes) of a token; `id` must be valid_id().
  const std::string& piece(std::int32_t id) const { return pieces[static_cast<std::size_t>(id)]; }
  /// Score (SentencePiece log-probability) of a token; `id` must be valid_id().
  float score(std::int32_t id) const { return scores[static_cast<std::size_t>(id)]; }

  /// Id of `piece` (the lowest id for a duplicated piece), or -1. Valid after finalize().
  std::int32_t find(std::string_view piece) const;
  /// Id of the SentencePiece byte token "<0xXX>" for `byte`, or -1 if the vocabulary has none.
  std::int32_t byte_token(std::uint8_t byte) const { return byte_tokens_[byte]; }
  /// Ids of the user-defined tokens (matched verbatim in the input before tokenizing), longest
  /// piece first, ties by id.
  const std::vector<std::int32_t>& user_defined() const { return user_defined_; }
  /// Ids of the control, unknown and user-defined tokens and of BOS / EOS (what parse_special
  /// matches in text),
  /// longest piece first, ties by id.
  const std::vector<std::int32_t>& specials() const { return specials_; }

 private:
  std::unordered_map<std::string, std::int32_t, StringViewHash, std::equal_to<>> index_;
  std::int32_t byte_tokens_[256] = {};
  std::vector<std::int32_t> user_defined_;
  std::vector<std::int32_t> specials_;
};

/// Makes control tokens of the pieces llama.cpp treats as end-of-turn, end-of-generation or
/// fill-in-the-middle markers whatever their stored type ("<|im_end|>", "<|endoftext|>", "</s>",
/// "<|fim_prefix|>", ...: llama-vocab.cpp's "control-looking token" overrides of GGUF
/// vocabularies), so that parse_special matches them and decoding hides them as llama.cpp
/// does. Call before Vocab::finalize.
void promote_control_looking_tokens(Vocab& v);

/// The byte a SentencePiece byte piece stands for: "<0x0A>" → 0x0A; nullopt for other text.
std::optional<std::uint8_t> parse_byte_piece(std::string_view piece);

/// Token type from its GGUF number (1..6); unknown numbers (0 = undefined, > 6) read as normal.
TokenType token_type_from_int(std::int64_t v);

}  // namespace peregrine

#include "peregrine/tokenizer/llama2c_tokenizer.h"

#include <cmath>

#include "peregrine/core/byte_reader.h"
#include "peregrine/core/mapped_file.h"
#include "peregrine/tokenizer/spm_tokenizer.h"
#include "peregrine/tokenizer/utf8.h"
#include "spm_piece.h"

namespace peregrine {
namespace {

constexpr std::int32_t kMaxTokenLength = 1 << 16;

// Type of the token with this id and (restored) piece, as llama2.c's export implies.
TokenType infer_type(std::int32_t id, const std::string& piece) {
  if (id == 0) return TokenType::kUnknown;
  if (id == 1 || id == 2) return TokenType::kControl;
  if (parse_byte_piece(piece)) return TokenType::kByte;
  return TokenType::kNormal;
}

// "\n<s>\n" → "<s>": the export wrapped the control pieces in newlines.
std::string strip_newlines(std::string s) {
  while (!s.empty() && s.front() == '\n') s.erase(0, 1);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

Status read_entry(ByteReader& r, std::int32_t max_len, Vocab& v, const std::string& what) {
  const std::size_t at = r.offset();
  PEREGRINE_ASSIGN_OR_RETURN(float score, r.read<float>());
  PEREGRINE_ASSIGN_OR_RETURN(std::int32_t len, r.read<std::int32_t>());
  const std::string where = what + ": token " + std::to_string(v.pieces.size()) + " at offset " + std::to_string(at);
  if (len < 0 || len > max_len) {
    return corrupt_file(where + " has length " + std::to_string(len) + " (max_token_length " +
                        std::to_string(max_len) + ")");
  }
  if (!std::isfinite(score)) return corrupt_file(where + " has a non-finite score");
  PEREGRINE_ASSIGN_OR_RETURN(std::string raw, r.read_string(static_cast<std::uint64_t>(len)));
  const auto id = static_cast<std::int32_t>(v.pieces.size());
  std::string piece = id <= 2 ? strip_newlines(std::move(raw)) : replace_all(raw, " ", kSpmSpace);
  v.types.push_back(infer_type(id, piece));
  v.scores.push_back(score);
  v.pieces.push_back(std::move(piece));
  return Status::ok();
}

}  // namespace

Expected<Vocab> parse_llama2c_vocab(std::span<const std::uint8_t> bytes, const std::string& what) {
  ByteReader r(bytes, what);
  PEREGRINE_ASSIGN_OR_RETURN(std::int32_t max_len, r.read<std::int32_t>());
  if (max_len <= 0 || max_len > kMaxTokenLength) {
    return corrupt_file(what + ": max_token_length " + std::to_string(max_len) +
                        " is not a plausible llama2.c tokenizer header");
  }
  Vocab v;
  while (r.remaining() > 0) PEREGRINE_RETURN_IF_ERROR(read_entry(r, max_len, v, what));
  if (v.pieces.size() < 3) {
    return corrupt_file(what + ": " + std::to_string(v.pieces.size()) +
                        " tokens; a llama2.c tokenizer needs at least <unk>, <s>, </s>");
  }
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  PEREGRINE_RETURN_IF_ERROR(v.finalize(what));
  return v;
}

Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  PEREGRINE_ASSIGN_OR_RETURN(Vocab vocab, parse_llama2c_vocab(file->bytes(), path));
  return std::unique_ptr<Tokenizer>(SpmTokenizer::create(std::move(vocab), SpmOptions{}));
}

}  // namespace peregrine

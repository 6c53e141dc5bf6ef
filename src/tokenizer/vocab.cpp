#include "peregrine/tokenizer/vocab.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

namespace peregrine {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Status check_special(std::int32_t id, std::int32_t n, const char* name, const std::string& what) {
  if (id < -1 || id >= n) {
    return corrupt_file(what + ": " + name + " id " + std::to_string(id) +
                        " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
  return Status::ok();
}

}  // namespace

std::optional<std::uint8_t> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  const int hi = hex_value(piece[3]);
  const int lo = hex_value(piece[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<std::uint8_t>(hi * 16 + lo);
}

TokenType token_type_from_int(std::int64_t v) {
  if (v >= 1 && v <= 6) return static_cast<TokenType>(v);
  return TokenType::kNormal;
}

Status Vocab::finalize(const std::string& what) {
  const std::size_t n = pieces.size();
  if (n == 0) return corrupt_file(what + ": the vocabulary is empty");
  if (n > (std::size_t{1} << 24)) return corrupt_file(what + ": absurd vocabulary size " + std::to_string(n));
  if (scores.size() != n || types.size() != n) {
    return corrupt_file(what + ": " + std::to_string(n) + " tokens but " + std::to_string(scores.size()) +
                        " scores and " + std::to_string(types.size()) + " token types");
  }
  const auto nn = static_cast<std::int32_t>(n);
  PEREGRINE_RETURN_IF_ERROR(check_special(bos_id, nn, "BOS", what));
  PEREGRINE_RETURN_IF_ERROR(check_special(eos_id, nn, "EOS", what));
  PEREGRINE_RETURN_IF_ERROR(check_special(unk_id, nn, "UNK", what));
  index_.clear();
  index_.reserve(n);
  std::fill(std::begin(byte_tokens_), std::end(byte_tokens_), -1);
  user_defined_.clear();
  specials_.clear();
  for (std::int32_t id = 0; id < nn; ++id) {
    index_.emplace(pieces[static_cast<std::size_t>(id)], id);
    if (type(id) == TokenType::kByte) {
      if (auto b = parse_byte_piece(piece(id)); b && byte_tokens_[*b] < 0) byte_tokens_[*b] = id;
    }
    if (type(id) == TokenType::kUserDefined && !piece(id).empty()) user_defined_.push_back(id);
    const bool special = type(id) == TokenType::kUserDefined || type(id) == TokenType::kControl ||
                         type(id) == TokenType::kUnknown || id == bos_id || id == eos_id;
    if (special && !piece(id).empty()) specials_.push_back(id);
  }
  const auto longer = [&](std::int32_t a, std::int32_t b) { return piece(a).size() > piece(b).size(); };
  std::stable_sort(user_defined_.begin(), user_defined_.end(), longer);
  std::stable_sort(specials_.begin(), specials_.end(), longer);
  return Status::ok();
}

void promote_control_looking_tokens(Vocab& v) {
  // llama-vocab.cpp (b10470) load(): the EOT / EOM / FIM / EOG texts it forces to control.
  static const std::unordered_set<std::string_view> kControlLooking = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
      "[EOT]", "[EOS]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|eom_id|>", "<|return|>", "<|call|>",
      "<|flush|>", "<|calls|>", "</s>", "<eos>", "<turn|>", "<|tool_response>", "[e~[",
      "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
      "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
      "▁<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "[PAD]", "<PAD>",
      "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};
  for (std::size_t id = 0; id < v.pieces.size() && id < v.types.size(); ++id) {
    if (kControlLooking.contains(v.pieces[id])) v.types[id] = TokenType::kControl;
  }
}

std::int32_t Vocab::find(std::string_view piece) const {
  auto it = index_.find(piece);
  return it == index_.end() ? -1 : it->second;
}

}  // namespace peregrine

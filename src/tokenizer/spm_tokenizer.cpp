#include "peregrine/tokenizer/spm_tokenizer.h"

#include "peregrine/tokenizer/pair_merge.h"
#include "peregrine/tokenizer/special_split.h"
#include "peregrine/tokenizer/utf8.h"
#include "spm_piece.h"

namespace peregrine {

std::unique_ptr<SpmTokenizer> SpmTokenizer::create(Vocab vocab, SpmOptions options) {
  return std::unique_ptr<SpmTokenizer>(new SpmTokenizer(std::move(vocab), std::move(options)));
}

std::vector<std::int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos, ParseSpecial parse) const {
  std::vector<std::int32_t> out;
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  bool prefix = options_.add_space_prefix;  // the start of the text counts as "after a token"
  for (const auto& f : split_special_tokens(text, vocab_, parse == ParseSpecial::kYes)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prefix = options_.add_space_prefix && !options_.space_prefix_only_at_start;
    } else {
      encode_fragment(f.text, prefix, out);
      prefix = false;
    }
  }
  return out;
}

void SpmTokenizer::encode_fragment(std::string_view text, bool prefix_space,
                                   std::vector<std::int32_t>& out) const {
  std::string norm = prefix_space ? std::string(kSpmSpace) : std::string();
  norm += replace_all(text, " ", kSpmSpace);
  if (!options_.split_words) {
    encode_normalized(norm, out);
    return;
  }
  // Words start at each "▁" (HF Metaspace split, behaviour MergedWithNext).
  const std::string_view all(norm);
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t next = all.find(kSpmSpace, start + 1);
    const std::size_t end = next == std::string_view::npos ? all.size() : next;
    encode_normalized(all.substr(start, end - start), out);
    start = end;
  }
}

void SpmTokenizer::encode_normalized(std::string_view norm, std::vector<std::int32_t>& out) const {
  const PairPriority priority = [this](std::string_view l, std::string_view r) { return pair_priority(l, r); };
  for (const Span& s : merge_pairs(norm, char_spans(norm), priority)) emit_symbol(norm.substr(s.begin, s.size), out);
}

std::int32_t SpmTokenizer::mergeable_id(std::string_view piece) const {
  const std::int32_t id = vocab_.find(piece);
  if (id < 0) return -1;
  const TokenType t = vocab_.type(id);
  const bool ok = t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused;
  return ok ? id : -1;
}

std::optional<double> SpmTokenizer::pair_priority(std::string_view left, std::string_view right) const {
  if (options_.ranks) {
    const std::int32_t l = mergeable_id(left);
    const std::int32_t r = l < 0 ? -1 : mergeable_id(right);
    if (r < 0) return std::nullopt;
    const auto rank = options_.ranks->rank(l, r);
    if (!rank) return std::nullopt;
    return -static_cast<double>(*rank);
  }
  // left and right are adjacent in the normalized text, so their concatenation is a view.
  const std::string_view merged(left.data(), left.size() + right.size());
  const std::int32_t id = mergeable_id(merged);
  if (id < 0) return std::nullopt;
  return static_cast<double>(vocab_.score(id));
}

void SpmTokenizer::emit_symbol(std::string_view symbol, std::vector<std::int32_t>& out) const {
  if (const std::int32_t id = mergeable_id(symbol); id >= 0) {
    out.push_back(id);
    return;
  }
  bool have_bytes = true;
  for (char c : symbol) have_bytes = have_bytes && vocab_.byte_token(static_cast<std::uint8_t>(c)) >= 0;
  if (!have_bytes) {
    if (vocab_.unk_id >= 0) out.push_back(vocab_.unk_id);
    return;
  }
  for (char c : symbol) out.push_back(vocab_.byte_token(static_cast<std::uint8_t>(c)));
}

std::string SpmTokenizer::decode_token(std::int32_t prev, std::int32_t id) const {
  if (!vocab_.valid_id(id)) return "";
  const bool drop_space = options_.add_space_prefix && spm_at_text_start(prev, vocab_.bos_id);
  return spm_decode_piece(vocab_.piece(id), vocab_.type(id), drop_space);
}

std::string SpmTokenizer::piece(std::int32_t id) const { return vocab_.valid_id(id) ? vocab_.piece(id) : ""; }

}  // namespace peregrine

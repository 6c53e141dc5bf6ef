#include "peregrine/tokenizer/bpe_tokenizer.h"

#include "peregrine/tokenizer/byte_level.h"
#include "peregrine/tokenizer/pair_merge.h"
#include "peregrine/tokenizer/special_split.h"

namespace peregrine {

Expected<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options) {
  PEREGRINE_ASSIGN_OR_RETURN(auto pre, PreTokenizer::compile(options.pre.regexes));
  MergeRanks ranks(merges, vocab);
  return std::unique_ptr<BpeTokenizer>(
      new BpeTokenizer(std::move(vocab), std::move(ranks), std::move(pre), std::move(options)));
}

BpeTokenizer::BpeTokenizer(Vocab vocab, MergeRanks ranks, PreTokenizer pre, BpeOptions options)
    : vocab_(std::move(vocab)), ranks_(std::move(ranks)), pre_(std::move(pre)), options_(std::move(options)) {}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos, ParseSpecial parse) const {
  std::vector<std::int32_t> out;
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  for (const auto& f : split_special_tokens(text, vocab_, parse == ParseSpecial::kYes)) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      encode_fragment(f.text, out);
    }
  }
  return out;
}

void BpeTokenizer::encode_fragment(std::string_view text, std::vector<std::int32_t>& out) const {
  std::string prefixed;
  if (options_.add_prefix_space && !text.empty() && text.front() != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  for (std::string_view word : pre_.split(text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  const std::string mapped = byte_level_encode(word);
  if (options_.pre.ignore_merges) {
    if (const std::int32_t id = vocab_.find(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const PairPriority priority = [this](std::string_view l, std::string_view r) -> std::optional<double> {
    const std::int32_t li = vocab_.find(l);
    const std::int32_t ri = li < 0 ? -1 : vocab_.find(r);
    if (ri < 0) return std::nullopt;
    const auto rank = ranks_.rank(li, ri);
    if (!rank) return std::nullopt;
    return -static_cast<double>(*rank);
  };
  for (const Span& s : merge_pairs(mapped, char_spans(mapped), priority)) {
    emit_symbol(std::string_view(mapped).substr(s.begin, s.size), out);
  }
}

void BpeTokenizer::emit_symbol(std::string_view symbol, std::vector<std::int32_t>& out) const {
  if (const std::int32_t id = vocab_.find(symbol); id >= 0) {
    out.push_back(id);
    return;
  }
  // Not a piece (only with incomplete vocabularies): fall back to its characters.
  for (const Span& c : char_spans(symbol)) {
    const std::int32_t id = vocab_.find(symbol.substr(c.begin, c.size));
    if (id >= 0) {
      out.push_back(id);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    }
  }
}

std::string BpeTokenizer::decode_token(std::int32_t /*prev*/, std::int32_t id) const {
  if (!vocab_.valid_id(id)) return "";
  switch (vocab_.type(id)) {
    case TokenType::kControl: return "";
    case TokenType::kUserDefined: return vocab_.piece(id);
    case TokenType::kByte:
      if (auto b = parse_byte_piece(vocab_.piece(id))) return std::string(1, static_cast<char>(*b));
      return byte_level_decode(vocab_.piece(id));
    default: return byte_level_decode(vocab_.piece(id));
  }
}

std::string BpeTokenizer::piece(std::int32_t id) const { return vocab_.valid_id(id) ? vocab_.piece(id) : ""; }

}  // namespace peregrine

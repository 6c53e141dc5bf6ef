#include "peregrine/tokenizer/special_split.h"

namespace peregrine {
namespace {

// Splits one raw fragment at every occurrence of `piece` (token `id`), appending to `out`.
void split_fragment(const TextFragment& f, std::string_view piece, std::int32_t id,
                    std::vector<TextFragment>& out) {
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = f.text.find(piece, pos);
    if (hit == std::string_view::npos) break;
    if (hit > pos) out.push_back({f.text.substr(pos, hit - pos), -1});
    out.push_back({f.text.substr(hit, piece.size()), id});
    pos = hit + piece.size();
  }
  if (pos < f.text.size()) out.push_back({f.text.substr(pos), -1});
}

}  // namespace

std::vector<TextFragment> split_special_tokens(std::string_view text, const Vocab& vocab, bool parse_special) {
  std::vector<TextFragment> frags;
  if (!text.empty()) frags.push_back({text, -1});
  const std::vector<std::int32_t>& tokens = parse_special ? vocab.specials() : vocab.user_defined();
  for (std::int32_t id : tokens) {
    if (text.find(vocab.piece(id)) == std::string_view::npos) continue;
    std::vector<TextFragment> next;
    next.reserve(frags.size() + 2);
    for (const auto& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
      } else {
        split_fragment(f, vocab.piece(id), id, next);
      }
    }
    frags = std::move(next);
  }
  return frags;
}

}  // namespace peregrine

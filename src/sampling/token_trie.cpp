#include "peregrine/sampling/token_trie.h"

#include <algorithm>

#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {
namespace {

// Fills node `n` with the sorted ids [lo, hi), all sharing their first `depth` bytes: the ids
// whose bytes end at depth are its tokens, the rest its children, one per next byte. Children
// of a node get consecutive indices.
void fill(std::vector<TokenTrie::Node>& nodes, std::vector<std::int32_t>& token_ids, const std::vector<std::string>& bytes,
          const std::vector<std::int32_t>& sorted, std::uint32_t n, std::size_t lo, std::size_t hi, std::size_t depth) {
  std::size_t i = lo;
  nodes[n].token_first = static_cast<std::uint32_t>(token_ids.size());
  for (; i < hi && bytes[static_cast<std::size_t>(sorted[i])].size() == depth; ++i) token_ids.push_back(sorted[i]);
  nodes[n].n_tokens = static_cast<std::uint32_t>(token_ids.size()) - nodes[n].token_first;
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  for (std::size_t j = i; j < hi;) {
    const char b = bytes[static_cast<std::size_t>(sorted[j])][depth];
    std::size_t k = j;
    while (k < hi && bytes[static_cast<std::size_t>(sorted[k])][depth] == b) ++k;
    groups.emplace_back(j, k);
    j = k;
  }
  const auto first = static_cast<std::uint32_t>(nodes.size());
  nodes[n].child_first = first;
  nodes[n].n_children = static_cast<std::uint32_t>(groups.size());
  nodes.resize(nodes.size() + groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto child = first + static_cast<std::uint32_t>(g);
    nodes[child].byte = static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(sorted[groups[g].first])][depth]);
    fill(nodes, token_ids, bytes, sorted, child, groups[g].first, groups[g].second, depth + 1);
  }
}

}  // namespace

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<std::int32_t> sorted;
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty()) sorted.push_back(static_cast<std::int32_t>(id));
  }
  std::sort(sorted.begin(), sorted.end(), [&](std::int32_t a, std::int32_t b) {
    return bytes_[static_cast<std::size_t>(a)] < bytes_[static_cast<std::size_t>(b)] ||
           (bytes_[static_cast<std::size_t>(a)] == bytes_[static_cast<std::size_t>(b)] && a < b);
  });
  nodes_.resize(1);
  fill(nodes_, token_ids_, bytes_, sorted, 0, 0, sorted.size(), 0);
}

std::shared_ptr<const TokenTrie> TokenTrie::of(const Tokenizer& tokenizer) {
  // An ordinary previous token: SentencePiece drops a leading space only at the start.
  std::int32_t prev = 0;
  while (prev == tokenizer.bos_id() || prev == tokenizer.eos_id()) ++prev;
  std::vector<std::string> bytes(static_cast<std::size_t>(tokenizer.vocab_size()));
  for (std::int32_t id = 0; id < tokenizer.vocab_size(); ++id) bytes[static_cast<std::size_t>(id)] = tokenizer.decode_token(prev, id);
  return std::make_shared<const TokenTrie>(std::move(bytes));
}

const std::string& TokenTrie::bytes(std::int32_t id) const {
  static const std::string kNone;
  return id >= 0 && id < vocab_size() ? bytes_[static_cast<std::size_t>(id)] : kNone;
}

}  // namespace peregrine

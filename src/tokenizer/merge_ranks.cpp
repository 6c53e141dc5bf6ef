#include "peregrine/tokenizer/merge_ranks.h"

namespace peregrine {

Expected<std::pair<std::string, std::string>> split_merge_line(std::string_view line) {
  const std::size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
  if (sp == std::string_view::npos) {
    return corrupt_file("BPE merge rule '" + std::string(line) + "' is not two pieces separated by a space");
  }
  return std::make_pair(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
}

MergeRanks::MergeRanks(const std::vector<std::pair<std::string, std::string>>& merges, const Vocab& vocab) {
  ranks_.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::int32_t l = vocab.find(merges[i].first);
    const std::int32_t r = vocab.find(merges[i].second);
    if (l >= 0 && r >= 0) ranks_.emplace(key(l, r), static_cast<std::int32_t>(i));
  }
}

std::optional<std::int32_t> MergeRanks::rank(std::int32_t left, std::int32_t right) const {
  auto it = ranks_.find(key(left, right));
  if (it == ranks_.end()) return std::nullopt;
  return it->second;
}

}  // namespace peregrine

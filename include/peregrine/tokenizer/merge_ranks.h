// Ranked BPE merge rules ("left right" lines), as in GPT-2's vocab.bpe, GGUF
// tokenizer.ggml.merges and tokenizer.json model.merges (BPE: Sennrich et al. 2016).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/tokenizer/vocab.h"

namespace peregrine {

/// Splits a merge line "Ġ t" into ("Ġ", "t") at the first space after the first byte (so a
/// left part that is itself a space still works). Errors: kCorruptFile when there is no such space.
Expected<std::pair<std::string, std::string>> split_merge_line(std::string_view line);

/// Merge rules indexed by the ids of their two parts; rank = position in the list (0 = first,
/// merged first). Rules whose parts are not vocabulary pieces can never apply and are dropped.
class MergeRanks {
 public:
  /// No rules: rank() is always nullopt.
  MergeRanks() = default;
  /// Builds the index of `merges` (in rank order) against the finalized `vocab` (duplicates:
  /// the first rank wins). Never fails: unusable rules are dropped.
  MergeRanks(const std::vector<std::pair<std::string, std::string>>& merges, const Vocab& vocab);

  /// Rank of merging `left` and `right` (ids), or nullopt if no rule merges them.
  std::optional<std::int32_t> rank(std::int32_t left, std::int32_t right) const;
  /// Number of usable rules.
  std::size_t size() const { return ranks_.size(); }

 private:
  static std::uint64_t key(std::int32_t l, std::int32_t r) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(l)) << 32) | static_cast<std::uint32_t>(r);
  }
  std::unordered_map<std::uint64_t, std::int32_t> ranks_;
};

}  // namespace peregrine

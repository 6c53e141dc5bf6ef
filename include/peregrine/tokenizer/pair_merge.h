// Greedy pairwise merging, the core of both BPE flavours.
//
// SentencePiece BPE (Kudo & Richardson 2018, sentencepiece bpe_model.cc) repeatedly merges the
// adjacent pair whose concatenation is the vocabulary piece with the highest score; GPT-2 BPE
// (Sennrich et al. 2016; Radford et al. 2019) repeatedly merges the adjacent pair with the
// lowest merge rank. Both are "pick the best adjacent pair, merge, repeat" with ties broken
// leftmost, so one engine serves both: the caller supplies the priority of a pair.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace peregrine {

/// A run of bytes [begin, begin + size) of the text being merged.
struct Span {
  std::uint32_t begin = 0;
  std::uint32_t size = 0;
};

/// Priority of merging the adjacent symbols `left` and `right` (higher merges first), or
/// nullopt when the pair must not be merged.
using PairPriority = std::function<std::optional<double>(std::string_view left, std::string_view right)>;

/// Merges adjacent symbols of `text`, starting from `initial` (consecutive spans covering the
/// text, e.g. its UTF-8 characters), always taking the mergeable pair of highest priority
/// (ties: the leftmost) until no pair is mergeable. Returns the final symbols in text order.
/// Cost O(n log n) in the number of initial symbols (priority queue + linked list); spans use
/// 32-bit offsets, so `text` must be shorter than 4 GiB.
std::vector<Span> merge_pairs(std::string_view text, const std::vector<Span>& initial,
                              const PairPriority& priority);

/// The UTF-8 characters of `text` as spans (invalid bytes are 1-byte characters).
std::vector<Span> char_spans(std::string_view text);

}  // namespace peregrine

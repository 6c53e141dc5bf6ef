// An incremental index of one token sequence's n-grams → the positions that followed them, for
// prompt lookup decoding (Saxena 2023; llama.cpp's lookup, vLLM's ngram proposer): finding
// every earlier occurrence of the sequence's last n tokens costs one hash lookup instead of a
// scan of the whole context.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

class NgramIndex {
 public:
  /// Indexes n-grams of lengths [min_n, max_n]. Errors: kInvalidArgument unless
  /// 1 <= min_n <= max_n <= kMaxNgram.
  static Expected<NgramIndex> create(std::int32_t min_n, std::int32_t max_n);

  static constexpr std::int32_t kMaxNgram = 16;

  std::int32_t min_n() const { return min_n_; }
  std::int32_t max_n() const { return max_n_; }
  /// The tokens the index describes (those of the last sync).
  std::span<const std::int32_t> tokens() const { return tokens_; }

  /// Makes the index describe `tokens`: keeps the longest common prefix with tokens(), drops
  /// the n-grams of the positions past it (newest first) and adds those of the new positions.
  /// Cost: one comparison per common token, plus (max_n - min_n + 1) hash-map updates per
  /// changed position (a decode step adds a handful).
  void sync(std::span<const std::int32_t> tokens);

  /// Continuation starts of the earlier occurrences of tokens()'s last n tokens, newest first,
  /// at most `max_results`: every e < tokens().size() with tokens[e - n, e) == the last n
  /// tokens (so tokens[e] is what followed that occurrence). Appends to `out`. Nothing for n
  /// outside [min_n, max_n] or n >= tokens().size().
  void find(std::int32_t n, std::int32_t max_results, std::vector<std::int32_t>& out) const;

 private:
  NgramIndex(std::int32_t min_n, std::int32_t max_n);
  /// Hash of tokens_[end - n, end) (collisions are resolved by comparing tokens in find).
  std::uint64_t key(std::int64_t end, std::int32_t n) const;
  void add_position(std::int64_t e);     // n-grams ending at e, followed by tokens_[e]
  void remove_position(std::int64_t e);  // the inverse; e must be the newest position indexed

  std::int32_t min_n_, max_n_;
  std::vector<std::int32_t> tokens_;
  // by_n_[n - min_n]: n-gram hash → continuation starts, increasing.
  std::vector<std::unordered_map<std::uint64_t, std::vector<std::int32_t>>> by_n_;
};

}  // namespace peregrine

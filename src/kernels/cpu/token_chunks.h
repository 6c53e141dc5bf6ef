// The token loop of the rows-in-lanes packed GEMVs (half_packed.cpp, gemv_bf16_dot.cpp,
// sparse_nm_packed.cpp, sparse_nm_q8_packed.cpp): per 16-row group, the tokens in chunks of up
// to kMax, each chunk one instantiation of the kernel's register tile, so the group is read from
// memory once and stays in L1/L2 for the later chunks; and when each chunk hints the next group.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/count_dispatch.h"

namespace peregrine {

/// One chunk of a group's tokens: its first token, its index among the group's chunks, and how
/// many chunks the group's tokens make.
struct TokenChunk {
  std::size_t first, index, count;
};

/// Calls chunk_fn.template operator()<T>(chunk) for every chunk of n_tokens tokens:
/// ⌈n_tokens / kMax⌉ chunks of sizes T ≤ kMax that differ by at most one (the larger first). No
/// call for n_tokens = 0.
template <std::size_t kMax, class ChunkFn>
inline void for_token_chunks(std::size_t n_tokens, ChunkFn&& chunk_fn) {
  if (n_tokens == 0) return;
  const std::size_t chunks = (n_tokens + kMax - 1) / kMax;
  const std::size_t base = n_tokens / chunks, larger = n_tokens % chunks;
  std::size_t t = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t size = base + (c < larger ? 1 : 0);
    const TokenChunk chunk{t, c, chunks};
    dispatch_count<std::size_t{1}, kMax>(size, [&]<std::size_t T>() { chunk_fn.template operator()<T>(chunk); });
    t += size;
  }
}

/// Calls tile.template operator()<T>(g, chunk) for every group g in [g0, g1) and every chunk of
/// the tokens (for_token_chunks), group by group.
template <std::size_t kMax = 4, class Tile>
inline void for_groups_in_token_chunks(std::size_t g0, std::size_t g1, std::size_t n_tokens, Tile&& tile) {
  for (std::size_t g = g0; g < g1; ++g) {
    for_token_chunks<kMax>(n_tokens, [&]<std::size_t T>(TokenChunk chunk) { tile.template operator()<T>(g, chunk); });
  }
}

/// When a kernel that reads the current row group once per token chunk hints the next group into
/// L2. The kernel walks the group in `steps` steps of equal bytes; the next group's steps are cut
/// into one contiguous range per chunk, and chunk c hints its range's steps one at a time, at
/// every C-th step of its walk (C chunks), so the chunks together hint the whole next group once,
/// in order, and its DRAM read runs through all of the current group's chunks. Hinting the whole
/// next group from every chunk crowded the read into the first chunk and left the later ones
/// computing with DRAM idle (half_packed.cpp has the figures). gemv_bf16_dot.cpp still hints from
/// every chunk: the hints spread there (a byte cursor) ran 2-6 tokens 10-15% slower, more tokens
/// 5-10% faster.
class NextGroupHints {
 public:
  NextGroupHints(TokenChunk chunk, std::size_t steps)
      : every_(chunk.count),
        next_(chunk.index * ((steps + chunk.count - 1) / chunk.count)),
        end_(std::min(steps, next_ + (steps + chunk.count - 1) / chunk.count)) {}

  /// Call once per step of the walk, in order: whether this step hints the next group, and if so
  /// `step` is the next group's step whose bytes to hint.
  bool due(std::size_t& step) {
    if (countdown_-- != 0 || next_ >= end_) return false;
    countdown_ = every_ - 1;
    step = next_++;
    return true;
  }

 private:
  std::size_t every_, next_, end_, countdown_ = 0;
};

}  // namespace peregrine

// The token loop of the rows-in-lanes packed GEMVs (half_packed.cpp, gemv_bf16_dot.cpp,
// sparse_nm_packed.cpp, sparse_nm_q8_packed.cpp): per 16-row group, the tokens in chunks of up
// to kMax, each chunk one instantiation of the kernel's register tile, so the group is read from
// memory once and stays in L1/L2 for the later chunks.
#pragma once

#include <cstddef>
#include <utility>

namespace peregrine {

namespace token_chunks_detail {
template <std::size_t... T, class Tile>
inline void dispatch(std::index_sequence<T...>, std::size_t size, Tile& tile, std::size_t g, std::size_t t) {
  (void)((size == T + 1 ? (tile.template operator()<T + 1>(g, t), true) : false) || ...);
}
}  // namespace token_chunks_detail

/// Calls tile.template operator()<T>(g, t) for every group g in [g0, g1) and every chunk of the
/// tokens: ⌈n_tokens / kMax⌉ chunks of sizes T ≤ kMax that differ by at most one (the larger
/// first), t the chunk's first token.
template <std::size_t kMax = 4, class Tile>
inline void for_groups_in_token_chunks(std::size_t g0, std::size_t g1, std::size_t n_tokens, Tile&& tile) {
  if (n_tokens == 0) return;
  const std::size_t chunks = (n_tokens + kMax - 1) / kMax;
  const std::size_t base = n_tokens / chunks, larger = n_tokens % chunks;
  for (std::size_t g = g0; g < g1; ++g) {
    std::size_t t = 0;
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t size = base + (c < larger ? 1 : 0);
      token_chunks_detail::dispatch(std::make_index_sequence<kMax>(), size, tile, g, t);
      t += size;
    }
  }
}

}  // namespace peregrine

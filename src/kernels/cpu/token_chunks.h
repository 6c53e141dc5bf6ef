// The token loop of the rows-in-lanes packed GEMVs (half_packed.cpp, sparse_nm_packed.cpp): per
// 16-row group, the tokens in chunks of up to 4, each chunk one instantiation of the kernel's
// register tile, so the group is read from memory once and stays in L1/L2 for the later chunks.
#pragma once

#include <algorithm>
#include <cstddef>

namespace peregrine {

/// Calls tile.template operator()<T>(g, t) for every group g in [g0, g1) and every chunk of
/// T = min(4, n_tokens − t) tokens starting at t (t = 0, 4, 8, …).
template <class Tile>
inline void for_groups_in_token_chunks(std::size_t g0, std::size_t g1, std::size_t n_tokens, Tile&& tile) {
  constexpr std::size_t kChunkTokens = 4;
  for (std::size_t g = g0; g < g1; ++g) {
    for (std::size_t t = 0; t < n_tokens; t += kChunkTokens) {
      switch (std::min(kChunkTokens, n_tokens - t)) {
        case 1: tile.template operator()<1>(g, t); break;
        case 2: tile.template operator()<2>(g, t); break;
        case 3: tile.template operator()<3>(g, t); break;
        default: tile.template operator()<4>(g, t); break;
      }
    }
  }
}

}  // namespace peregrine

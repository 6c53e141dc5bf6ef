// One sequence's K (or V) of one layer in the paged KV cache, as the attention kernels read it.
// Its own header so the kernels depend on the block-table layout only, not on KvCache.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Position p lives in row p % block_size of pool block block_table[p / block_size]; a row is
/// kv_dim values in `dtype` (row_bytes bytes: f32, f16, q8_0 blocks of 32, or an f32 scale
/// followed by one i8 / f8 byte per value), a block is
/// block_size rows, and `base` is pool block 0 (PagedAttention, Kwon et al. 2023). Positions
/// from tail_begin on (a multiple of block_size), when `tail` is set, are contiguous rows of
/// `tail` instead (chain_view: a token-tree row's ancestors laid out as the chain they form).
struct KvLayerView {
  const std::uint8_t* base = nullptr;
  const std::int32_t* block_table = nullptr;
  std::int32_t block_size = 0;
  DType dtype = DType::kF32;
  std::int64_t row_bytes = 0;
  const std::uint8_t* tail = nullptr;
  std::int64_t tail_begin = 0;

  /// Address of position `pos`'s row.
  const std::uint8_t* row(std::int64_t pos) const {
    if (tail != nullptr && pos >= tail_begin) return tail + (pos - tail_begin) * row_bytes;
    const std::int64_t block = block_table[pos / block_size];
    return base + (block * block_size + pos % block_size) * row_bytes;
  }
};

/// The view one row of a token tree would have as a chain of one-row decode steps: positions
/// [0, p0) of `view` as they are, then at position p0 + j the tree's run slot p0 + path[j]
/// (path: the row's ancestors from the root, then the row itself; path[0] == 0, increasing).
/// The rows from the block holding p0 on are copied into `buffer` (resized to at most
/// block_size + path.size() rows), which the result reads: it must not outlive `buffer`.
/// Preconditions: view.tail unset, p0 >= 0, path non-empty, view's slots p0 + path[j] valid.
KvLayerView chain_view(const KvLayerView& view, std::int64_t p0, std::span<const std::int32_t> path,
                       std::vector<std::uint8_t>& buffer);

}  // namespace peregrine

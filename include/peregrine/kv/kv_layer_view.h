// One sequence's K (or V) of one layer in the paged KV cache, as the attention kernels read it.
// Its own header so the kernels depend on the block-table layout only, not on KvCache.
#pragma once

#include <cstdint>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Position p lives in row p % block_size of pool block block_table[p / block_size]; a row is
/// kv_dim values in `dtype` (row_bytes bytes: f32, f16, q8_0 blocks of 32, or an f32 scale
/// followed by one i8 / f8 byte per value), a block is
/// block_size rows, and `base` is pool block 0 (PagedAttention, Kwon et al. 2023).
struct KvLayerView {
  const std::uint8_t* base = nullptr;
  const std::int32_t* block_table = nullptr;
  std::int32_t block_size = 0;
  DType dtype = DType::kF32;
  std::int64_t row_bytes = 0;

  /// Address of position `pos`'s row.
  const std::uint8_t* row(std::int64_t pos) const {
    const std::int64_t block = block_table[pos / block_size];
    return base + (block * block_size + pos % block_size) * row_bytes;
  }
};

}  // namespace peregrine

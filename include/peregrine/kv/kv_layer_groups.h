// KV cache groups (vLLM v1's hybrid KV cache manager, its KVCacheGroupSpec): the layers of a
// model are split into groups of equal size whose layers share one attention kind — full
// attention, or one sliding window. Each group keeps its own block table per sequence, so a
// sliding-window group can free the blocks that left its window (Mistral, Gemma 2 / 3) while a
// full-attention group keeps every block. All groups draw blocks of `layers_per_group` layers
// from one pool. A model without sliding windows is one group of all its layers.
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/kv/kv_shape.h"

namespace peregrine {

struct KvLayerGroups {
  std::int64_t layers_per_group = 0;
  std::vector<std::int64_t> group_windows;  // [n_groups]: 0 full attention, else the window
  std::vector<std::int32_t> layer_group;    // [n_layers]: the group of each layer
  std::vector<std::int32_t> layer_slot;     // [n_layers]: its index among its group's layers

  std::int32_t n_groups() const { return static_cast<std::int32_t>(group_windows.size()); }
};

/// The groups of `shape`: layers_per_group is the greatest common divisor of the numbers of
/// layers of each distinct window (0 included); the layers of one window, in layer order, fill
/// its groups; groups are ordered by window (full attention first), then by layer.
/// Precondition: shape.n_layers >= 1 and layer_windows empty or of n_layers entries >= 0.
KvLayerGroups kv_layer_groups(const KvShape& shape);

}  // namespace peregrine

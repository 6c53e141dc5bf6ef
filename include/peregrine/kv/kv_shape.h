// What the KV cache needs to know of a model: its layers, the width of one position's K (or V)
// row, and which layers attend through a sliding window. The model layer derives it from its
// config (ModelConfig::kv_shape, model/spec/model_config.h); the cache never sees the config.
#pragma once

#include <cstdint>
#include <vector>

namespace peregrine {

struct KvShape {
  std::int64_t n_layers = 0;
  std::int64_t n_kv_heads = 0;  // key/value heads (GQA: fewer than the query heads)
  std::int64_t head_dim = 0;
  /// Per layer, its sliding window in positions (a query at position p sees keys
  /// [p - window + 1, p]), 0 for full attention; empty: every layer attends fully.
  std::vector<std::int64_t> layer_windows = {};

  /// Values in one position's K (or V) row of one layer: n_kv_heads · head_dim.
  std::int64_t kv_dim() const { return n_kv_heads * head_dim; }
  /// Layer `layer`'s window (0: full attention).
  std::int64_t window(std::int64_t layer) const {
    return layer_windows.empty() ? 0 : layer_windows[static_cast<std::size_t>(layer)];
  }
};

}  // namespace peregrine

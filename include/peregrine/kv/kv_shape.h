// What the KV cache needs to know of a model: its layers and the width of one position's K (or
// V) row. The model layer derives it from its config (ModelConfig::kv_shape,
// model/spec/model_config.h); the cache never sees the config.
#pragma once

#include <cstdint>

namespace peregrine {

struct KvShape {
  std::int64_t n_layers = 0;
  std::int64_t n_kv_heads = 0;  // key/value heads (GQA: fewer than the query heads)
  std::int64_t head_dim = 0;

  /// Values in one position's K (or V) row of one layer: n_kv_heads · head_dim.
  std::int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace peregrine

#include "peregrine/kv/kv_cache.h"

namespace peregrine {

KvCache::KvCache(const ModelConfig& config, std::int32_t n_seqs, std::int64_t ctx_len)
    : n_seqs_(n_seqs),
      n_layers_(config.n_layers),
      ctx_len_(ctx_len),
      kv_dim_(config.n_kv_heads * config.head_dim),
      lengths_(static_cast<std::size_t>(n_seqs), 0),
      k_(static_cast<std::size_t>(n_seqs * n_layers_ * ctx_len * kv_dim_)),
      v_(k_.size()) {}

}  // namespace peregrine

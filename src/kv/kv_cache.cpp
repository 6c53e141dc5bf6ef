#include "peregrine/kv/kv_cache.h"

#include <unistd.h>

#include <string>

namespace peregrine {

Status check_kv_cache_fits(const ModelConfig& c, std::int32_t n_seqs, std::int64_t ctx_len) {
  const double bytes = 2.0 * n_seqs * static_cast<double>(c.n_layers) * static_cast<double>(ctx_len) *
                       static_cast<double>(c.n_kv_heads * c.head_dim) * sizeof(float);
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (ram > 0 && bytes > ram) {
    return out_of_range("a KV cache of " + std::to_string(ctx_len) + " tokens needs " +
                        std::to_string(bytes / (1 << 30)) +
                        " GiB, more than this machine's memory; use a smaller context");
  }
  return Status::ok();
}

ContiguousKvCache::ContiguousKvCache(const ModelConfig& config, std::int32_t n_seqs, std::int64_t ctx_len)
    : n_seqs_(n_seqs),
      n_layers_(config.n_layers),
      ctx_len_(ctx_len),
      kv_dim_(config.n_kv_heads * config.head_dim),
      lengths_(static_cast<std::size_t>(n_seqs), 0),
      k_(static_cast<std::size_t>(n_seqs * n_layers_ * ctx_len * kv_dim_)),
      v_(k_.size()) {}

}  // namespace peregrine

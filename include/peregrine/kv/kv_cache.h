// KV cache: keys and values of every processed position, per sequence and layer.
//
// This is the contiguous per-sequence layout (one [ctx_len, kv_dim] slab per sequence and
// layer); the paged block-table version (PagedAttention) replaces its storage behind the same
// accessors.
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Fails with kOutOfRange when a cache of `n_seqs` × `ctx_len` positions (f32 K and V, sizes as
/// in KvCache's constructor) would need more bytes than this machine's physical memory.
Status check_kv_cache_fits(const ModelConfig& config, std::int32_t n_seqs, std::int64_t ctx_len);

class KvCache {
 public:
  /// Room for `n_seqs` sequences of up to `ctx_len` positions each, f32.
  /// Memory: 2 * n_seqs * n_layers * ctx_len * n_kv_heads * head_dim * 4 bytes.
  KvCache(const ModelConfig& config, std::int32_t n_seqs, std::int64_t ctx_len);

  std::int32_t n_seqs() const { return n_seqs_; }
  std::int64_t ctx_len() const { return ctx_len_; }

  /// Positions [0, length) of `seq` hold valid K/V.
  std::int64_t length(std::int32_t seq) const { return lengths_[static_cast<std::size_t>(seq)]; }
  /// Sets the valid length (truncating drops the tail, e.g. rejected speculative tokens).
  void set_length(std::int32_t seq, std::int64_t n) { lengths_[static_cast<std::size_t>(seq)] = n; }

  /// [ctx_len, kv_dim] f32 K (or V) slab of (seq, layer).
  float* k(std::int32_t seq, std::int64_t layer) { return &k_[offset(seq, layer)]; }
  float* v(std::int32_t seq, std::int64_t layer) { return &v_[offset(seq, layer)]; }

 private:
  std::size_t offset(std::int32_t seq, std::int64_t layer) const {
    return static_cast<std::size_t>((seq * n_layers_ + layer) * ctx_len_ * kv_dim_);
  }
  std::int32_t n_seqs_;
  std::int64_t n_layers_, ctx_len_, kv_dim_;
  std::vector<std::int64_t> lengths_;
  std::vector<float> k_, v_;
};

}  // namespace peregrine

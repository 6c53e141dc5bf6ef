// RoPE (Su et al. 2021) of a forward's q and k rows and the K/V write into the paged cache on
// the GPU: the device twin of kernels/cpu's rope_rotate + KvCache::write for f32 / f16 K/V.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/rope_style.h"

namespace peregrine::cuda {

/// Per row i of n of the projections qkv [n, q | k | v] (row stride n_heads·head_dim +
/// 2·n_kv_heads·head_dim): rotates q ([n_heads, head_dim]) in place and k ([n_kv_heads, head_dim])
/// by the row's table cos[i, :], sin[i, :] ([n, head_dim], kernels/cpu rope_table's layout:
/// x'[a] = x[a]·cos[a] + x[b]·sin[a], x'[b] = x[b]·cos[b] + x[a]·sin[b] for each pair (a, b) of
/// `style`), and stores rotated k and v at physical KV row write_row[i] of the layer's K
/// and V slabs (k_cache / v_cache: [n_blocks·block_size, kv_dim] of `kv_dtype`, kF32 or kF16,
/// rounded to nearest). Errors: kUnavailable (launch failure).
Status rope_and_write_kv(float* qkv, const float* cos, const float* sin, std::int64_t n,
                         std::int64_t n_heads, std::int64_t n_kv_heads, std::int64_t head_dim, RopeStyle style,
                         const std::int32_t* write_row, DType kv_dtype, void* k_cache, void* v_cache,
                         cudaStream_t stream);

}  // namespace peregrine::cuda

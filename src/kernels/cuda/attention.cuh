// Causal attention over the paged KV cache on the GPU (prefill rows and decode rows alike):
// one thread block per (query row, query head) scores the row's visible slots chunk by chunk
// (a thread per slot, its K row read in 16-byte loads)
// with an online softmax (Milakov & Gimelshein 2018; FlashAttention's rescaling, Dao et al.
// 2022), reading K/V through the sequence's block table (PagedAttention, Kwon et al. 2023).
// The device twin of kernels/cpu/attention/attention.h's attention_prefill / attention_decode for f32
// and f16 K/V, with GQA, a sliding window and the score soft-cap.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"

namespace peregrine::cuda {

/// The paged K/V of one layer and how rows find their slots.
struct PagedKv {
  const void* k = nullptr;   // [n_blocks · block_size, kv_dim] of dtype
  const void* v = nullptr;
  DType dtype = DType::kF32;  // kF32 or kF16
  std::int32_t block_size = 0;
  const std::int32_t* tables = nullptr;        // the sequences' block tables, concatenated
  const std::int32_t* table_offset = nullptr;  // [n] start of row i's table in `tables`
  const std::int32_t* last_slot = nullptr;     // [n] row i attends to its slots [.., last_slot[i]]
};

struct AttentionDims {
  std::int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // head_dim <= 256
  float scale = 0.0f;       // score multiplier (1/sqrt(head_dim) unless the family says otherwise)
  std::int64_t window = 0;  // > 0: a row at slot s sees slots (s - window, s] only
  float softcap = 0.0f;     // > 0: score → cap · tanh(score / cap)
};

/// out[i, h, :] = Σ_j softmax_j(scale · q[i, h, :] · K[j, h / group, :]) · V[j, h / group, :]
/// over row i's visible slots j. q: [n, q_stride] f32 (row i's heads first); out: [n, n_heads ·
/// head_dim] f32.
/// Errors: kInvalidArgument (head_dim > 256), kUnavailable (launch failure).
Status paged_attention(const float* q, std::int64_t q_stride, std::int64_t n, const PagedKv& kv, const AttentionDims& dims, float* out,
                       cudaStream_t stream);

}  // namespace peregrine::cuda

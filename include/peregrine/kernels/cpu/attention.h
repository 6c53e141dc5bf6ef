// Causal scaled-dot-product attention of one query row against a sequence's KV cache, with
// grouped-query heads (GQA/MQA: query head h reads KV head h / (n_heads / n_kv_heads)).
#pragma once

#include <cstdint>

namespace peregrine {

/// Shapes of one attention call.
struct AttentionShape {
  std::int64_t n_heads = 0;     // query heads
  std::int64_t n_kv_heads = 0;  // KV heads (divides n_heads)
  std::int64_t head_dim = 0;
  std::int64_t kv_stride = 0;   // floats between consecutive positions in k/v (n_kv_heads*head_dim)
};

/// out[h] = softmax(q[h] · K[0..n_ctx)ᵀ / sqrt(head_dim)) · V[0..n_ctx) for every query head,
/// computed in one pass with an online (running max / running sum) softmax, so no score
/// vector is materialized (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022).
/// q: [n_heads, head_dim] f32; k, v: [n_ctx, kv_stride] f32; out: [n_heads, head_dim] f32.
/// `n_ctx` >= 1 positions are visible (the causal mask is the caller's choice of n_ctx).
void attention_row(const float* q, const float* k, const float* v, std::int64_t n_ctx,
                   const AttentionShape& s, float* out);

/// Scalar reference twin: materializes the scores, two-pass softmax in f64.
void attention_row_reference(const float* q, const float* k, const float* v,
                             std::int64_t n_ctx, const AttentionShape& s, float* out);

}  // namespace peregrine

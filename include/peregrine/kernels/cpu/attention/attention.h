// Causal (or token-tree-masked) scaled-dot-product attention against a sequence's KV cache, with
// grouped-query heads (GQA/MQA: query head h reads KV head h / (n_heads / n_kv_heads)).
//
// Two SIMD kernels share one tile routine (online softmax over KV tiles, Milakov & Gimelshein
// 2018; FlashAttention, Dao et al. 2022): attention_prefill for a run of query rows, causal or
// a token tree (SpecInfer tree attention, Miao et al. 2024; query tiles × KV tiles, threaded
// over query tiles × KV heads), and attention_decode for one row (FlashDecoding, Dao et al.
// 2023: the KV range split into chunks processed in parallel, merged with a log-sum-exp
// rescale). Neither materializes the score matrix. K/V are read through the paged cache's
// block tables (KvLayerView, PagedAttention, Kwon et al. 2023): f32 rows are read in place,
// one run of rows per block a tile touches (blocks of fewer than 8 rows are gathered into a
// contiguous tile first); f16, q8_0, i8 and f8 rows are widened to an f32 tile in the
// thread's workspace (i8 / f8: the row's f32 scale times the head's bytes, FP8 widened exactly
// through f16 with F16C). Decode over i8 / f8 K/V (attention_bench, TinyLlama's shape, one
// thread, shared 2-core machine): 1.12-1.22x (i8), 1.24-1.39x (f8_e4m3), 0.98-1.26x (f8_e5m2)
// the time of f32 K/V at n_ctx 512-4096, like q8_0's 1.11-1.18x. Measured on a shared 2-core machine (attention_bench, TinyLlama's
// shape, f32, shuffled blocks of 16 vs one contiguous block, same binary): decode 1.0-1.12x,
// prefill 1.00-1.02x the time; against the pre-paging pointer + stride kernel, decode of
// paged blocks of 16 took ~1.12-1.19x and prefill ~1.07-1.10x. Sliding window (attention_bench,
// TinyLlama's shape, one thread, paged f32): a window of 512 at n_ctx 4096 takes 0.24x the time
// of full attention in prefill and 0.11x in decode (min(n_ctx, window) / n_ctx of the tiles);
// full attention kept its speed (prefill L=2048 242-243 ms vs 247-248 ms, decode n_ctx=512
// 0.101-0.104 ms vs 0.113 ms before the window, alternating runs of both binaries).
#pragma once

#include <cstdint>

#include "peregrine/core/thread_pool.h"
#include "peregrine/kv/kv_layer_view.h"

namespace peregrine {

/// Shapes of one attention call, and how its scores are formed.
/// Score of query q and key k: x = scale · q·k (scale = 1/sqrt(head_dim) unless given:
/// Gemma 2's query_pre_attn_scalar^-0.5); with softcap > 0 it becomes softcap · tanh(x /
/// softcap) before the softmax (Gemma 2's attn_logit_softcapping, modeling_gemma2.py).
/// Sliding window (Mistral; Gemma 2's local layers): window > 0 limits a query at position p to
/// the keys at positions [p - window + 1, p], the convention of transformers' masking_utils.py
/// sliding_window_overlay (kv_idx > q_idx - sliding_window) and of llama.cpp's
/// llama_hparams::is_masked_swa (LLAMA_SWA_TYPE_STANDARD masks p - p_kv >= n_swa); the kernels
/// skip whole KV tiles below the window instead of masking them. 0 = full attention.
struct AttentionShape {
  std::int64_t n_heads = 0;     // query heads
  std::int64_t n_kv_heads = 0;  // KV heads (divides n_heads)
  std::int64_t head_dim = 0;     // a K/V row holds n_kv_heads * head_dim values
  std::int64_t window = 0;       // sliding window in positions (>= 0; 0 = none)
  float softcap = 0.0f;          // attention-score soft-capping (>= 0, finite; 0 = none)
  float scale = 0.0f;            // score scale (> 0), or 0 for 1/sqrt(head_dim)
};

/// Below this many multiply-adds (2 · visible positions · n_heads · head_dim summed over the
/// query rows) a call runs on the calling thread. Measured here (attention_bench's 1- vs
/// 2-thread decode sweep, AVX-512, 2 cores): at 65536 multiply-adds (TinyLlama's shape at n_ctx
/// 16) one thread takes 6.0 µs and two 3.6 µs, and the second thread's gain grows from there;
/// smaller calls (stories260K's heads) stay inline. Re-check on a quiet machine: a shared,
/// loaded one shows no 2-thread gain.
inline constexpr std::int64_t kMinParallelAttentionMacs = std::int64_t{1} << 16;

/// Prefill attention for a run of `n_q` query rows of one sequence whose K/V sit at slots
/// p0 .. p0+n_q-1. Causal (mask == nullptr): row i is at position p0 + i and attends to KV
/// slots [0, p0 + i]. Token tree (SpecInfer tree attention, Miao et al. 2024): `mask` is
/// [n_q, n_q] row-major u8; row i attends to slots [0, p0) and to run slot p0 + j iff
/// mask[i * n_q + j] != 0. The mask must be a tree's ancestor-or-self relation rooted at row 0:
/// mask[i * n_q + 0] and mask[i * n_q + i] nonzero, mask[i * n_q + j] == 0 for j > i (the rows
/// are in topological order), so no row is left without a visible key.
/// q, out: [n_q, n_heads * head_dim] f32 (out fully overwritten; RoPE already applied to q and
/// k at the rows' own positions); k, v: the sequence's K and V of this layer, slots
/// [0, p0 + n_q) valid (this run's own K/V already written), rows of n_kv_heads * head_dim
/// values in f32, f16, q8_0 (q8_0 needs that row length % 32 == 0), or i8 / f8_e4m3 / f8_e5m2
/// (one f32 scale per row, then a byte per value: core/dtype.h).
/// out[i, h] = softmax(score(q[i, h], K[S_i])) · V[S_i], S_i the slots row i sees (score as in
/// AttentionShape). With s.window > 0, S_i keeps only the positions within the window of row
/// i's position: causal row i (position p0 + i) drops slots below p0 + i - window + 1; a tree
/// row at depth d (position p0 + d, d = its number of ancestors) drops cached slots below
/// p0 + d - window + 1 and ancestors more than window - 1 positions above it.
/// Query tiles × KV tiles with a running max / sum per query row and head (FlashAttention, Dao
/// et al. 2022); masked scores are set to -inf inside a tile, so a tree costs what a causal run
/// of n_q rows costs. Every query head of a KV group shares each K/V tile. Threaded over (query
/// tile, KV head) pairs when the call has at least `min_parallel_macs` multiply-adds (0 forces
/// the pool). f32 accumulation. Preconditions (the model's batch validation guarantees them):
/// n_q >= 1, p0 >= 0, p0 + n_q < 2^24, n_heads, n_kv_heads, head_dim >= 1, n_kv_heads divides
/// n_heads, window / softcap / scale as in AttentionShape, the mask as above.
void attention_prefill(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t p0,
                       std::int64_t n_q, const AttentionShape& s, float* out, ThreadPool& pool,
                       std::int64_t min_parallel_macs = kMinParallelAttentionMacs,
                       const std::uint8_t* mask = nullptr);

/// Decode attention of one query row against all `n_ctx` >= 1 positions of k, v.
/// q, out: [n_heads, head_dim] f32; k, v: as for attention_prefill, positions [0, n_ctx) valid.
/// out[h] = softmax(score(q[h], K[b..n_ctx))) · V[b..n_ctx), b = max(0, n_ctx - s.window) with a
/// window (the row sits at position n_ctx - 1), else 0: positions below b are not read. With at least
/// `min_parallel_macs` multiply-adds and more than one thread, the KV range is split into
/// chunks (FlashDecoding, Dao et al. 2023) so that (KV head, chunk) pairs keep every thread
/// busy; each chunk's (max, sum, unnormalized output) are merged by log-sum-exp rescaling.
/// Otherwise it runs on the calling thread. The query heads of a KV group sit in SIMD lanes and
/// share each K/V element loaded; a group too small to fill 3/8 of a vector (e.g. OLMoE's and
/// Phi-3's one query head per KV head) puts head_dim in the lanes instead, one dot product per
/// score. f32 accumulation. Preconditions as above.
void attention_decode(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t n_ctx,
                      const AttentionShape& s, float* out, ThreadPool& pool,
                      std::int64_t min_parallel_macs = kMinParallelAttentionMacs);

/// Scalar reference twin of both kernels for one query row seeing positions [0, n_ctx), or,
/// with `visible` ([n_ctx] u8, nonzero somewhere), only the positions t with visible[t] != 0
/// (a token-tree row: the cached prefix, its ancestors and itself): widens every K/V row to f32
/// (the values the kernels read), materializes the scores (s.scale, s.softcap), two-pass softmax
/// in f64. s.window > 0 without `visible` drops the positions t <= n_ctx - 1 - window (the row
/// sits at n_ctx - 1); a `visible` mask is taken as given (its caller applies the window).
/// q, out: [n_heads, head_dim] f32; k, v: as for attention_decode.
void attention_row_reference(const float* q, const KvLayerView& k, const KvLayerView& v,
                             std::int64_t n_ctx, const AttentionShape& s, float* out,
                             const std::uint8_t* visible = nullptr);

}  // namespace peregrine

// Per-target decode attention with the query heads in rows and head_dim in the SIMD lanes, for
// KV groups too small to fill the lanes of the query-lane kernel (attention.cpp puts the query
// heads of a KV group in lanes: OLMoE and Phi-3 have one query head per KV head, which would
// use 1 of 16 lanes under AVX-512).
//
// The g query heads of one KV head sit in rows qrow [g, row_pad] (zero-padded). Per tile of keys
// j, each head's scores are dot products st[h, j] = Σ_d q[h, d] · K[j, d] (one horizontal sum
// per score), the online softmax runs over the tile's scores as vectors of keys, and the head's
// output accumulates as orow[h, d] = orow[h, d] · corr[h] + Σ_j p[h, j] · V[j, d] with a block of
// dim vectors in registers across the tile's keys. Every lane does useful work whatever g is;
// the price is a horizontal sum per score, which the query-lane kernel avoids, so attention.cpp
// picks this kernel only for small groups (use_head_rows). The softmax state is the query-lane
// kernel's (m, l per head; the output is transposed into ot [head_dim, r_pad] at the end), so
// FlashDecoding's chunk merge and the output write are shared.
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_ATTENTION_HEAD_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_ATTENTION_HEAD_ROWS_INL_H_
#undef PEREGRINE_KERNELS_CPU_ATTENTION_HEAD_ROWS_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_ATTENTION_HEAD_ROWS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/cpu/attention/attention_detail.h"
#include "kernels/cpu/attention/attention_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// attention_detail, D and V: from attention_tiles-inl.h.

// Keys per dot-product block (independent FMA chains) and dim vectors per value block
// (accumulators held in registers across a tile's keys).
inline constexpr std::size_t kDotKeys = 8;
inline constexpr std::size_t kValueVecs = 8;

// st[a] = Σ_d q[d] · krows[a][d] for kK keys; q is zero-padded to a whole vector, the keys'
// last partial vector (head_dim % lanes) is read masked.
template <std::size_t kK>
HWY_INLINE void dot_block(const float* const* HWY_RESTRICT krows, const float* HWY_RESTRICT q,
                          std::size_t head_dim, float* HWY_RESTRICT st) {
  const D d;
  const std::size_t n = hn::Lanes(d);
  V acc[kK];
  for (std::size_t a = 0; a < kK; ++a) acc[a] = hn::Zero(d);
  std::size_t i = 0;
  for (; i + n <= head_dim; i += n) {
    const V qv = hn::Load(d, q + i);
    for (std::size_t a = 0; a < kK; ++a) acc[a] = hn::MulAdd(hn::LoadU(d, krows[a] + i), qv, acc[a]);
  }
  if (i < head_dim) {
    const auto tail = hn::FirstN(d, head_dim - i);
    const V qv = hn::Load(d, q + i);
    for (std::size_t a = 0; a < kK; ++a) acc[a] = hn::MulAdd(hn::MaskedLoad(tail, d, krows[a] + i), qv, acc[a]);
  }
  for (std::size_t a = 0; a < kK; ++a) st[a] = hn::GetLane(hn::SumOfLanes(d, acc[a]));
}

// st[j] = q · krows[j] for keys [j, n_keys), in blocks of kK keys, then halving blocks.
template <std::size_t kK = kDotKeys>
HWY_INLINE void head_scores(const float* const* HWY_RESTRICT krows, std::size_t j, std::size_t n_keys,
                            const float* HWY_RESTRICT q, std::size_t head_dim, float* HWY_RESTRICT st) {
  for (; j + kK <= n_keys; j += kK) dot_block<kK>(krows + j, q, head_dim, st + j);
  if constexpr (kK > 1) head_scores<kK / 2>(krows, j, n_keys, q, head_dim, st);
}

// o[i0 + x·n + l] = o[...] · corr + Σ_j p[j] · vrows[j][i0 + x·n + l] for kX dim vectors from i0;
// kTail: the last of them is the row's partial vector (read masked; o is padded to row_pad).
template <std::size_t kX, bool kTail>
HWY_INLINE void value_dims(const float* const* HWY_RESTRICT vrows, std::size_t i0, std::size_t head_dim,
                           const float* HWY_RESTRICT p, std::size_t n_keys, float corr, float* HWY_RESTRICT o) {
  const D d;
  const std::size_t n = hn::Lanes(d);
  const auto tail = hn::FirstN(d, head_dim - (i0 + (kX - 1) * n));
  const V c = hn::Set(d, corr);
  V acc[kX];
  for (std::size_t x = 0; x < kX; ++x) acc[x] = hn::Mul(hn::Load(d, o + i0 + x * n), c);
  for (std::size_t j = 0; j < n_keys; ++j) {
    const V pj = hn::Set(d, p[j]);
    const float* HWY_RESTRICT v = vrows[j] + i0;
    for (std::size_t x = 0; x < kX; ++x) {
      const V vx = (kTail && x + 1 == kX) ? hn::MaskedLoad(tail, d, v + x * n) : hn::LoadU(d, v + x * n);
      acc[x] = hn::MulAdd(vx, pj, acc[x]);
    }
  }
  for (std::size_t x = 0; x < kX; ++x) hn::Store(acc[x], d, o + i0 + x * n);
}

// value_dims<n_vecs, kTail> for a run-time block width n_vecs in [1, kX].
template <bool kTail, std::size_t kX = kValueVecs>
HWY_INLINE void value_dims_n(std::size_t n_vecs, const float* const* HWY_RESTRICT vrows, std::size_t i0,
                             std::size_t head_dim, const float* HWY_RESTRICT p, std::size_t n_keys, float corr,
                             float* HWY_RESTRICT o) {
  if (n_vecs == kX) return value_dims<kX, kTail>(vrows, i0, head_dim, p, n_keys, corr, o);
  if constexpr (kX > 1) value_dims_n<kTail, kX - 1>(n_vecs, vrows, i0, head_dim, p, n_keys, corr, o);
}

// o = o · corr + Σ_j p[j] · vrows[j] over all head_dim dims: blocks of kValueVecs vectors, and
// the rest (with the partial tail vector, if any, as its last) in one block, so a head of up to
// kValueVecs vectors (Phi-3's 96 dims: 6 under AVX-512) takes one pass over the keys.
HWY_INLINE void head_values(const float* const* HWY_RESTRICT vrows, std::size_t head_dim, const float* HWY_RESTRICT p,
                            std::size_t n_keys, float corr, float* HWY_RESTRICT o) {
  const std::size_t n = hn::Lanes(D()), n_vecs = (head_dim + n - 1) / n;
  const bool tail = head_dim % n != 0;
  std::size_t v = 0;
  for (; n_vecs - v > kValueVecs; v += kValueVecs) value_dims<kValueVecs, false>(vrows, v * n, head_dim, p, n_keys, corr, o);
  if (tail) return value_dims_n<true>(n_vecs - v, vrows, v * n, head_dim, p, n_keys, corr, o);
  value_dims_n<false>(n_vecs - v, vrows, v * n, head_dim, p, n_keys, corr, o);
}

// Online softmax of one head over a tile's scores st[0, n_keys) (st has room for n_keys rounded
// up to a whole vector; the padding is set to -inf): m' = max(m, max_j st), corr =
// e^(scale·(m - m')), st → p = e^(scale·(st - m')), l = l · corr + Σ_j p, m = m'. Returns corr.
// m stays in unscaled score units, as in the query-lane kernel's softmax_update.
float head_softmax(float* HWY_RESTRICT st, std::size_t n_keys, float scale, float& m, float& l) {
  const D d;
  const std::size_t n = hn::Lanes(d), n_pad = (n_keys + n - 1) / n * n;
  std::fill(st + n_keys, st + n_pad, -INFINITY);
  V tile_max = hn::Set(d, -INFINITY);
  for (std::size_t j = 0; j < n_pad; j += n) tile_max = hn::Max(tile_max, hn::Load(d, st + j));
  const float m_new = std::max(m, hn::GetLane(hn::MaxOfLanes(d, tile_max)));
  const float m_sub = m_new == -INFINITY ? 0.0f : m_new;
  const float corr = std::exp((m - m_sub) * scale);  // e^-inf = 0 on the first tile
  const V m_v = hn::Set(d, m_sub), scale_v = hn::Set(d, scale);
  V sum = hn::Zero(d);
  for (std::size_t j = 0; j < n_pad; j += n) {
    const V p = hn::Exp(d, hn::Mul(hn::Sub(hn::Load(d, st + j), m_v), scale_v));
    hn::Store(p, d, st + j);
    sum = hn::Add(sum, p);
  }
  l = l * corr + hn::GetLane(hn::SumOfLanes(d, sum));
  m = m_new;
  return corr;
}

// Folds the n_keys KV positions of the tile in ws.k_runs / ws.v_runs into the states of the
// `group` query heads in ws.qrow / ws.orow (m, l in state.m / state.l), scores as `ts` says
// (soft-capped if ts.softcap > 0; decode masks nothing).
void attend_tile_rows(std::size_t n_keys, std::size_t group, std::size_t head_dim, const TileScores& ts,
                      Workspace& ws, const SoftmaxState& state) {
  row_pointers(ws.k_runs, ws.krows);
  row_pointers(ws.v_runs, ws.vrows);
  const auto row_pad = static_cast<std::size_t>(ws.row_pad);
  const std::size_t n = hn::Lanes(D()), n_pad = (n_keys + n - 1) / n * n;
  for (std::size_t h = 0; h < group; ++h) {
    float* st = ws.st + h * kKvTile;  // st holds kKvTile · r_pad >= kKvTile · group floats
    head_scores(ws.krows.data(), 0, n_keys, ws.qrow + h * row_pad, head_dim, st);
    if (ts.softcap > 0.0f) softcap_scores(1, n_pad, ts.softcap, ts.cap_scale, st);
    const float corr = head_softmax(st, n_keys, ts.exp_scale, state.m[h], state.l[h]);
    head_values(ws.vrows.data(), head_dim, st, n_keys, corr, ws.orow + h * row_pad);
  }
}

// ws.qrow[h] = the query vector of head kv_head · group + h of q [n_heads, head_dim], zero-padded
// to row_pad; ws.orow = 0.
void load_query_rows(const float* q, std::int64_t kv_head, const AttentionShape& s, Workspace& ws) {
  const std::int64_t group = s.n_heads / s.n_kv_heads;
  std::fill_n(ws.qrow, group * ws.row_pad, 0.0f);
  std::fill_n(ws.orow, group * ws.row_pad, 0.0f);
  for (std::int64_t h = 0; h < group; ++h) std::copy_n(q + (kv_head * group + h) * s.head_dim, s.head_dim, ws.qrow + h * ws.row_pad);
}

// state.ot[i, h] = ws.orow[h, i]: the head rows' outputs in the query-lane layout that the chunk
// merge and the output write read. The padding lanes h >= group get the max 0 (with sum and
// output 0), as a zero query gives them in the query-lane kernel, so the merge computes no NaN
// there.
void store_output_rows(std::int64_t group, std::int64_t head_dim, const Workspace& ws, const SoftmaxState& state) {
  for (std::int64_t h = 0; h < group; ++h) {
    for (std::int64_t i = 0; i < head_dim; ++i) state.ot[i * ws.r_pad + h] = ws.orow[h * ws.row_pad + i];
  }
  std::fill(state.m + group, state.m + ws.r_pad, 0.0f);
}

// Decode attention of the query heads of KV head `kv_head` (q [n_heads, head_dim]) against KV
// positions [begin, end), folded into `state` (initialized by the caller).
void attend_head_rows(const float* q, const KvLayerView& k, const KvLayerView& v, const AttentionShape& s,
                      std::int64_t kv_head, std::int64_t begin, std::int64_t end, const TileScores& ts,
                      Workspace& ws, const SoftmaxState& state) {
  const std::int64_t group = s.n_heads / s.n_kv_heads;
  load_query_rows(q, kv_head, s, ws);
  attend_range(k, v, s.head_dim, kv_head, begin, end, ws, [&](std::int64_t, std::size_t n_keys) {
    attend_tile_rows(n_keys, static_cast<std::size_t>(group), static_cast<std::size_t>(s.head_dim), ts, ws, state);
  });
  store_output_rows(group, s.head_dim, ws, state);
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // PEREGRINE_KERNELS_CPU_ATTENTION_HEAD_ROWS_INL_H_

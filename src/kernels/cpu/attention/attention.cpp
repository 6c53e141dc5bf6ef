// SIMD attention kernels (see attention.h). One tile routine serves prefill and decode:
//
// A "query block" holds the query vectors of one KV head: (row, head-in-group) pairs, one per
// SIMD lane r, stored transposed as qt[d, r]. Against a tile of KV rows j it computes scores
// st[j, r] = Σ_d K[j, d] · qt[d, r] (K entries broadcast, query lanes in vectors), so the
// running max, running sum and the rescale of the output ot[d, r] are plain lane-wise vector
// ops with no horizontal reductions, and every query head of the KV group shares each K/V
// element it loads. The output accumulates as ot[d, r] += Σ_j V[j, d] · p[j, r].
//
// Prefill: one block per (query tile of consecutive rows, KV head), KV tiles from position 0
// (with a sliding window: from the lowest slot a row of the block sees) up to the block's last
// row, with a causal mask only on tiles past the block's first row and a window mask only on
// tiles below the highest first-visible slot of the block; a token-tree run (SpecInfer tree
// attention) swaps the causal mask for its tree mask on the tiles holding the run's own slots
// (with a window, the tree mask also drops ancestors out of the window, and the window mask
// applies to the cached slots only).
// Decode: one row; the KV range is optionally split into chunks whose softmax states
// (max m, sum l, unnormalized output) merge as m = max(m1, m2), l = l1·e^(m1-m) + l2·e^(m2-m),
// o = o1·e^(m1-m) + o2·e^(m2-m) (FlashDecoding; m is kept unscaled, the exponents carry the
// score scale). With a window the KV range starts at the window's first position, so no tile
// is masked. Soft-capped scores (Gemma 2) are capped once per tile, softcap · tanh(scale · s /
// softcap), and then carry their scale already (the exponents use 1).
//
// Decode with a KV group too small to fill the lanes (use_head_rows) takes the head-rows kernel
// instead (attention_head_rows-inl.h: head_dim in lanes, the same softmax state and chunk merge).
//
// K/V tiles (attention_tiles-inl.h) come from the paged cache through a KvLayerView: a tile of positions is a list of
// runs of f32 rows with a stride ("tile runs"). f32 blocks of >= kMinDirectRows rows are read
// in place, one run per block the tile touches; smaller f32 blocks, f16, q8_0 and the per-token
// scaled i8 / f8 rows are widened into one contiguous f32 run in the workspace. The score product walks the K runs
// (register blocks of rows within a run); the value product reads V through one row pointer
// per key, so the tile's ot is loaded, rescaled and stored once whatever the block size.

#include "peregrine/kernels/cpu/attention/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "kernels/cpu/attention/attention_detail.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/cpu/attention/attention_head_rows-inl.h"
#include "kernels/cpu/attention/attention_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// attention_detail, D and V: from attention_tiles-inl.h.

// Register blocks of the two products: kR K rows (or V dims) × kV query-lane vectors, with
// kR · kV = kAccumulators independent FMA chains (enough to hide the FMA latency).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
inline constexpr std::size_t kAccumulators = 16;  // of the 32 zmm registers
inline constexpr std::size_t kVecs = 4;
#else
inline constexpr std::size_t kAccumulators = 8;  // of 16 registers
inline constexpr std::size_t kVecs = 2;
#endif

std::int64_t lanes() { return static_cast<std::int64_t>(hn::Lanes(D())); }

// Query lanes per prefill block: a few register blocks wide, so one K/V tile load serves
// hundreds of multiply-adds while the [kKvTile, r_pad] tiles stay in L1/L2.
std::int64_t prefill_block_lanes() { return 2 * static_cast<std::int64_t>(kVecs) * lanes(); }

std::int64_t padded_lanes(std::int64_t r) { return (r + lanes() - 1) / lanes() * lanes(); }

// Calls fn.template operator()<kR, kV>(row, vec) over an n_rows × n_vecs grid in register
// blocks: kVecs-wide vector blocks, then single vectors (decode's few query lanes) with
// correspondingly more rows; leftover rows go in halving blocks (15 = 8 + 4 + 2 + 1).
template <std::size_t kV, std::size_t kR, class Fn>
HWY_INLINE void for_row_blocks(std::size_t row, std::size_t n_rows, std::size_t vec, const Fn& fn) {
  for (; row + kR <= n_rows; row += kR) fn.template operator()<kR, kV>(row, vec);
  if constexpr (kR > 1) for_row_blocks<kV, kR / 2>(row, n_rows, vec, fn);
}
template <class Fn>
HWY_INLINE void for_blocks(std::size_t n_rows, std::size_t n_vecs, const Fn& fn) {
  std::size_t x = 0;
  for (; x + kVecs <= n_vecs; x += kVecs) for_row_blocks<kVecs, kAccumulators / kVecs>(0, n_rows, x, fn);
  for (; x < n_vecs; ++x) for_row_blocks<1, kAccumulators>(0, n_rows, x, fn);
}

// st[j, r] = Σ_d k[j, d] · qt[d, r] for kR rows of k and kV vectors of lanes.
template <std::size_t kR, std::size_t kV>
HWY_INLINE void score_block(const float* HWY_RESTRICT k, std::size_t stride,
                            const float* HWY_RESTRICT qt, std::size_t head_dim, std::size_t r_pad,
                            float* HWY_RESTRICT st) {
  const D d;
  const std::size_t n = hn::Lanes(d);
  V acc[kR][kV];
  for (std::size_t a = 0; a < kR; ++a)
    for (std::size_t x = 0; x < kV; ++x) acc[a][x] = hn::Zero(d);
  for (std::size_t i = 0; i < head_dim; ++i) {
    V qv[kV];
    for (std::size_t x = 0; x < kV; ++x) qv[x] = hn::Load(d, qt + i * r_pad + x * n);
    for (std::size_t a = 0; a < kR; ++a) {
      const V kb = hn::Set(d, k[a * stride + i]);
      for (std::size_t x = 0; x < kV; ++x) acc[a][x] = hn::MulAdd(kb, qv[x], acc[a][x]);
    }
  }
  for (std::size_t a = 0; a < kR; ++a)
    for (std::size_t x = 0; x < kV; ++x) hn::Store(acc[a][x], d, st + a * r_pad + x * n);
}

// ot[i, r] = ot[i, r] · corr[r] + Σ_j v_j[i] · pt[j, r] for kR dims i (from i0) and kV lane
// vectors; v_j = vrows[j] (one pointer per key, so a tile's keys may come from many blocks).
template <std::size_t kR, std::size_t kV>
HWY_INLINE void value_block(const float* const* HWY_RESTRICT vrows, std::size_t i0,
                            const float* HWY_RESTRICT pt, std::size_t n_keys, std::size_t r_pad,
                            const float* HWY_RESTRICT corr, float* HWY_RESTRICT ot) {
  const D d;
  const std::size_t n = hn::Lanes(d);
  V acc[kR][kV];
  for (std::size_t a = 0; a < kR; ++a)
    for (std::size_t x = 0; x < kV; ++x)
      acc[a][x] = hn::Mul(hn::Load(d, ot + a * r_pad + x * n), hn::Load(d, corr + x * n));
  for (std::size_t j = 0; j < n_keys; ++j) {
    const float* HWY_RESTRICT v = vrows[j] + i0;
    V pv[kV];
    for (std::size_t x = 0; x < kV; ++x) pv[x] = hn::Load(d, pt + j * r_pad + x * n);
    for (std::size_t a = 0; a < kR; ++a) {
      const V vb = hn::Set(d, v[a]);
      for (std::size_t x = 0; x < kV; ++x) acc[a][x] = hn::MulAdd(vb, pv[x], acc[a][x]);
    }
  }
  for (std::size_t a = 0; a < kR; ++a)
    for (std::size_t x = 0; x < kV; ++x) hn::Store(acc[a][x], d, ot + a * r_pad + x * n);
}

// Causal mask: score st[j, r] of key position pos0 + j becomes -inf past the lane's query
// position qpos[r].
void mask_future(const float* HWY_RESTRICT qpos, std::int64_t pos0, std::size_t n_keys,
                 std::size_t r_pad, float* HWY_RESTRICT st) {
  const D d;
  const V neg_inf = hn::Set(d, -INFINITY);
  for (std::size_t j = 0; j < n_keys; ++j) {
    const V pos = hn::Set(d, static_cast<float>(pos0 + static_cast<std::int64_t>(j)));
    for (std::size_t r = 0; r < r_pad; r += hn::Lanes(d)) {
      float* s = st + j * r_pad + r;
      hn::Store(hn::IfThenElse(hn::Le(pos, hn::Load(d, qpos + r)), hn::Load(d, s), neg_inf), d, s);
    }
  }
}

// Sliding window: score st[j, r] of key slot pos0 + j (j < n_keys) becomes -inf below the
// lane's first visible slot qlo[r].
void mask_window(const float* HWY_RESTRICT qlo, std::int64_t pos0, std::size_t n_keys, std::size_t r_pad,
                 float* HWY_RESTRICT st) {
  const D d;
  const V neg_inf = hn::Set(d, -INFINITY);
  for (std::size_t j = 0; j < n_keys; ++j) {
    const V pos = hn::Set(d, static_cast<float>(pos0 + static_cast<std::int64_t>(j)));
    for (std::size_t r = 0; r < r_pad; r += hn::Lanes(d)) {
      float* s = st + j * r_pad + r;
      hn::Store(hn::IfThenElse(hn::Lt(pos, hn::Load(d, qlo + r)), neg_inf, hn::Load(d, s)), d, s);
    }
  }
}

// Tree mask: score st[j, r] of key slot pos0 + j >= m.p0 becomes -inf unless the lane's row
// (qpos[r] - m.p0: qpos holds p0 + row, exact in f32 below 2^24) sees that run slot. Scalar:
// one byte test per score, ~1/head_dim of the score product's work, on the tiles a run's
// slots fall in only.
void mask_tree(const RunMask& m, const float* HWY_RESTRICT qpos, std::int64_t pos0, std::size_t n_keys,
               std::size_t r_pad, float* HWY_RESTRICT st) {
  for (std::int64_t t = std::max(pos0, m.p0); t < pos0 + static_cast<std::int64_t>(n_keys); ++t) {
    float* row = st + (t - pos0) * static_cast<std::int64_t>(r_pad);
    for (std::size_t r = 0; r < r_pad; ++r) {
      const auto i = static_cast<std::int64_t>(qpos[r]) - m.p0;
      if (m.mask[i * m.n_q + (t - m.p0)] == 0) row[r] = -INFINITY;
    }
  }
}

// Online softmax over one tile, with the running max m kept in unscaled score units:
// m' = max(m, max_j st), corr = e^(scale·(m - m')), st → p = e^(scale·(st - m')),
// l = l · corr + Σ_j p. Subtracting before scaling keeps scores of ~1e4 accurate: st - m' is
// exact near the max (Sterbenz), while rounding scale·st first would cost ulp(1e4) ≈ 1e-3 of
// the exponent on targets without FMA. A lane whose keys so far are all masked (m' = -inf: a
// window or tree lane of a block starting below its first visible key) subtracts 0 instead,
// so corr and p are 0, not NaN.
void softmax_update(std::size_t n_keys, std::size_t r_pad, float scale, float* HWY_RESTRICT st,
                    const SoftmaxState& state, float* HWY_RESTRICT corr) {
  const D d;
  const V scale_v = hn::Set(d, scale);
  for (std::size_t r = 0; r < r_pad; r += hn::Lanes(d)) {
    V tile_max = hn::Set(d, -INFINITY);
    for (std::size_t j = 0; j < n_keys; ++j) tile_max = hn::Max(tile_max, hn::Load(d, st + j * r_pad + r));
    const V m_old = hn::Load(d, state.m + r);
    const V m_new = hn::Max(m_old, tile_max);
    const V m_sub = hn::IfThenZeroElse(hn::Eq(m_new, hn::Set(d, -INFINITY)), m_new);
    const V c = hn::Exp(d, hn::Mul(hn::Sub(m_old, m_sub), scale_v));  // e^-inf = 0 on the first tile
    V sum = hn::Zero(d);
    for (std::size_t j = 0; j < n_keys; ++j) {
      float* s = st + j * r_pad + r;
      const V p = hn::Exp(d, hn::Mul(hn::Sub(hn::Load(d, s), m_sub), scale_v));  // masked: e^-inf = 0
      hn::Store(p, d, s);
      sum = hn::Add(sum, p);
    }
    hn::Store(hn::MulAdd(hn::Load(d, state.l + r), c, sum), d, state.l + r);
    hn::Store(m_new, d, state.m + r);
    hn::Store(c, d, corr + r);
  }
}

// Folds KV positions [pos0, pos0 + n_keys) (their K and V rows of one KV head in ws.k_runs,
// ws.v_runs) into the state of the query block in `ws`, the scores formed and masked as `ts`
// says.
void attend_tile(std::int64_t pos0, std::size_t n_keys, std::size_t head_dim, const TileScores& ts,
                 Workspace& ws, const SoftmaxState& state) {
  const auto r_pad = static_cast<std::size_t>(ws.r_pad);
  const std::size_t n_vecs = r_pad / hn::Lanes(D());
  const std::size_t n = hn::Lanes(D());
  std::size_t j0 = 0;
  for (std::size_t r = 0; r < ws.k_runs.n; ++r) {
    const RowRun& run = ws.k_runs.runs[r];
    for_blocks(run.n_rows, n_vecs, [&]<std::size_t kR, std::size_t kV>(std::size_t j, std::size_t x) {
      score_block<kR, kV>(run.p + j * run.stride, run.stride, ws.qt + x * n, head_dim, r_pad, ws.st + (j0 + j) * r_pad + x * n);
    });
    j0 += run.n_rows;
  }
  if (ts.softcap > 0.0f) softcap_scores(n_keys, r_pad, ts.softcap, ts.cap_scale, ws.st);
  const std::int64_t last_key = pos0 + static_cast<std::int64_t>(n_keys) - 1;
  if (ts.tree != nullptr) {
    if (last_key >= ts.tree->p0) mask_tree(*ts.tree, ws.qpos, pos0, n_keys, r_pad, ws.st);
  } else if (last_key > ts.min_qpos) {
    mask_future(ws.qpos, pos0, n_keys, r_pad, ws.st);
  }
  if (pos0 < ts.max_lo) {
    const std::int64_t n_lo = std::min(static_cast<std::int64_t>(n_keys), ts.lo_end - pos0);
    if (n_lo > 0) mask_window(ws.qlo, pos0, static_cast<std::size_t>(n_lo), r_pad, ws.st);
  }
  softmax_update(n_keys, r_pad, ts.exp_scale, ws.st, state, ws.corr);
  row_pointers(ws.v_runs, ws.vrows);
  for_blocks(head_dim, n_vecs, [&]<std::size_t kR, std::size_t kV>(std::size_t i, std::size_t x) {
    value_block<kR, kV>(ws.vrows.data(), i, ws.st + x * n, n_keys, r_pad, ws.corr + x * n, state.ot + i * r_pad + x * n);
  });
}

// Loads rows [b.row_begin, b.row_end) of q (a run starting at slot p0; tree: its mask, or
// nullptr) for the query heads of KV head b.kv_head into ws.qt / ws.qpos (slots) / ws.qlo (the
// first slot seen under s.window); padding lanes get q = 0 at the last row's slot.
void load_queries(const float* q, std::int64_t p0, const RunMask* tree, const QueryBlock& b,
                  const AttentionShape& s, Workspace& ws) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim, q_stride = s.n_heads * hd;
  const std::int64_t n_lanes = (b.row_end - b.row_begin) * group;
  for (std::int64_t r = 0; r < ws.r_pad; ++r) {
    const bool pad = r >= n_lanes;
    const std::int64_t row = pad ? b.row_end - 1 : b.row_begin + r / group;
    const float* qr = q + row * q_stride + (b.kv_head * group + r % group) * hd;
    for (std::int64_t i = 0; i < hd; ++i) ws.qt[i * ws.r_pad + r] = pad ? 0.0f : qr[i];
    ws.qpos[r] = static_cast<float>(p0 + row);
    ws.qlo[r] = static_cast<float>(first_visible_slot(row_position(p0, tree, row), s.window));
  }
}

void init_state(std::int64_t head_dim, std::int64_t r_pad, const SoftmaxState& state) {
  std::fill_n(state.ot, head_dim * r_pad, 0.0f);
  std::fill_n(state.m, r_pad, -INFINITY);
  std::fill_n(state.l, r_pad, 0.0f);
}

// The score scale: s.scale, or 1/sqrt(head_dim).
float score_scale(const AttentionShape& s) {
  return s.scale > 0.0f ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

// The exponent's multiplier: the score scale, or 1 once soft-capping has applied it.
float softmax_scale(const AttentionShape& s) { return s.softcap > 0.0f ? 1.0f : score_scale(s); }

// The tile settings of a block: causal (tree == nullptr) or tree-masked from min_qpos on,
// window-masked below max_lo (keys below lo_end).
TileScores tile_scores(const AttentionShape& s, std::int64_t min_qpos, const RunMask* tree, std::int64_t max_lo,
                       std::int64_t lo_end) {
  const float cap_scale = s.softcap > 0.0f ? score_scale(s) / s.softcap : 0.0f;
  return {softmax_scale(s), s.softcap, cap_scale, min_qpos, tree, max_lo, lo_end};
}

// Attends the block loaded in ws to KV positions [begin, end) of KV head `kv_head`, scores as
// `ts` says.
void attend_block(const KvLayerView& k, const KvLayerView& v, const AttentionShape& s, std::int64_t kv_head,
                  std::int64_t begin, std::int64_t end, const TileScores& ts, Workspace& ws,
                  const SoftmaxState& state) {
  attend_range(k, v, s.head_dim, kv_head, begin, end, ws, [&](std::int64_t t, std::size_t n_keys) {
    attend_tile(t, n_keys, static_cast<std::size_t>(s.head_dim), ts, ws, state);
  });
}

// out rows of block b = ot / l, transposed back to [row, head, d].
void write_output(const SoftmaxState& state, const QueryBlock& b, const AttentionShape& s,
                  std::int64_t r_pad, float* out) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim;
  const std::int64_t n_lanes = (b.row_end - b.row_begin) * group;
  for (std::int64_t r = 0; r < n_lanes; ++r) {
    float* o = out + (b.row_begin + r / group) * s.n_heads * hd + (b.kv_head * group + r % group) * hd;
    for (std::int64_t i = 0; i < hd; ++i) o[i] = state.ot[i * r_pad + r] / state.l[r];
  }
}

// a ← a ⊕ b: the softmax state of the union of two disjoint KV ranges (m in unscaled units).
void merge_state(const SoftmaxState& a, const SoftmaxState& b, std::int64_t head_dim,
                 std::int64_t r_pad, float scale) {
  const D d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  const V scale_v = hn::Set(d, scale);
  for (std::int64_t r = 0; r < r_pad; r += n) {
    const V ma = hn::Load(d, a.m + r), mb = hn::Load(d, b.m + r), m = hn::Max(ma, mb);
    const V ca = hn::Exp(d, hn::Mul(hn::Sub(ma, m), scale_v)), cb = hn::Exp(d, hn::Mul(hn::Sub(mb, m), scale_v));
    hn::Store(hn::MulAdd(hn::Load(d, a.l + r), ca, hn::Mul(hn::Load(d, b.l + r), cb)), d, a.l + r);
    hn::Store(m, d, a.m + r);
    for (std::int64_t i = 0; i < head_dim; ++i) {
      float* o = a.ot + i * r_pad + r;
      hn::Store(hn::MulAdd(hn::Load(d, o), ca, hn::Mul(hn::Load(d, b.ot + i * r_pad + r), cb)), d, o);
    }
  }
}

SoftmaxState workspace_state(Workspace& ws) { return {ws.ot, ws.m, ws.l}; }

// The first-visible slots of block b's rows under s.window: {lowest, highest}.
std::pair<std::int64_t, std::int64_t> block_window(std::int64_t p0, const RunMask* tree, const QueryBlock& b,
                                                   std::int64_t window) {
  std::int64_t lo = INT64_MAX, hi = 0;
  for (std::int64_t row = b.row_begin; row < b.row_end; ++row) {
    const std::int64_t first = first_visible_slot(row_position(p0, tree, row), window);
    lo = std::min(lo, first);
    hi = std::max(hi, first);
  }
  return {lo, hi};
}

void PrefillImpl(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t p0, std::int64_t n_q,
                 const std::uint8_t* mask, const AttentionShape& s, float* out, ThreadPool& pool, bool parallel) {
  std::vector<std::int32_t> depth;
  std::vector<std::uint8_t> windowed;
  if (mask != nullptr && s.window > 0) window_tree_mask(mask, n_q, s.window, depth, windowed);
  const RunMask tree{windowed.empty() ? mask : windowed.data(), p0, n_q, depth.empty() ? nullptr : depth.data()};
  const RunMask* run_tree = mask != nullptr ? &tree : nullptr;
  const std::int64_t group = s.n_heads / s.n_kv_heads;
  const std::int64_t rows_per_block = std::max<std::int64_t>(1, prefill_block_lanes() / group);
  const std::int64_t n_blocks = (n_q + rows_per_block - 1) / rows_per_block;
  const std::int64_t r_pad = padded_lanes(std::min(n_q, rows_per_block) * group);
  run_items(pool, parallel, n_blocks * s.n_kv_heads, s, r_pad, 0, [&](std::int64_t item, Workspace& ws) {
    const std::int64_t block = n_blocks - 1 - item / s.n_kv_heads;  // longest KV ranges first
    const QueryBlock b{block * rows_per_block, std::min(n_q, (block + 1) * rows_per_block), item % s.n_kv_heads};
    load_queries(q, p0, run_tree, b, s, ws);
    const SoftmaxState state = workspace_state(ws);
    init_state(s.head_dim, r_pad, state);
    const auto [begin, max_lo] = block_window(p0, run_tree, b, s.window);
    const TileScores ts = tile_scores(s, p0 + b.row_begin, run_tree, max_lo, run_tree != nullptr ? p0 : INT64_MAX);
    attend_block(k, v, s, b.kv_head, begin, p0 + b.row_end, ts, ws, state);
    write_output(state, b, s, r_pad, out);
  });
}

// KV positions per decode chunk: (KV head, chunk) items = lcm(n_threads, n_kv_heads), so the
// items divide evenly among the threads; chunks are whole KV tiles (the last one may be short).
std::int64_t decode_chunk_len(std::int64_t n_ctx, std::int64_t n_kv_heads, std::int64_t n_threads) {
  const std::int64_t chunks = n_threads / std::gcd(n_threads, n_kv_heads);
  const std::int64_t tiles = (n_ctx + kKvTile - 1) / kKvTile;
  return (tiles + chunks - 1) / chunks * kKvTile;
}

// Decode takes the head-rows kernel (attention_head_rows-inl.h) when a KV group's query heads
// would fill at most 3/8 of a vector's lanes in the query-lane kernel: AVX-512, 1 thread,
// n_ctx 64 / 512 / 4096, lane-kernel time over head-rows time: 7.2 / 6.4 / 3.0 at one query
// head per KV head (OLMoE), 4.1 / 3.7 / 3.0 at 2 (Qwen3), 1.2 / 1.07 / 1.03 at 6, 1.06 / 0.94 /
// 0.91 at 7 (Qwen2.5-0.5B), 0.93 / 0.75 / 0.77 at 8 (TinyLlama), bench/attention_bench.
bool use_head_rows(std::int64_t group) { return 8 * group <= 3 * lanes(); }

void DecodeImpl(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t n_ctx,
                const AttentionShape& s, float* out, ThreadPool& pool, bool parallel) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim, r_pad = padded_lanes(group);
  const bool head_rows = use_head_rows(group);
  const std::int64_t begin = first_visible_slot(n_ctx - 1, s.window), n_keys = n_ctx - begin;  // every key visible
  const std::int64_t chunk_len = parallel ? decode_chunk_len(n_keys, s.n_kv_heads, pool.n_threads()) : n_keys;
  const std::int64_t n_chunks = (n_keys + chunk_len - 1) / chunk_len;
  const TileScores ts = tile_scores(s, n_ctx - 1, nullptr, 0, 0);
  const std::int64_t state_floats = (hd + 2) * r_pad;
  // Split states: [n_kv_heads * n_chunks] of (ot [hd, r_pad], m, l).
  hwy::AlignedFreeUniquePtr<float[]> partials;
  if (n_chunks > 1) partials = hwy::AllocateAligned<float>(static_cast<std::size_t>(s.n_kv_heads * n_chunks * state_floats));
  auto partial = [&](std::int64_t item) {
    float* p = partials.get() + item * state_floats;
    return SoftmaxState{p, p + hd * r_pad, p + (hd + 1) * r_pad};
  };
  run_items(pool, parallel, s.n_kv_heads * n_chunks, s, r_pad, head_rows ? padded_lanes(hd) : 0, [&](std::int64_t item, Workspace& ws) {
    const QueryBlock b{0, 1, item / n_chunks};
    const std::int64_t chunk = item % n_chunks, lo = begin + chunk * chunk_len, hi = std::min(n_ctx, lo + chunk_len);
    const SoftmaxState state = n_chunks > 1 ? partial(item) : workspace_state(ws);
    init_state(hd, r_pad, state);
    if (head_rows) {
      attend_head_rows(q, k, v, s, b.kv_head, lo, hi, ts, ws, state);
    } else {
      load_queries(q, n_ctx - 1, nullptr, b, s, ws);
      attend_block(k, v, s, b.kv_head, lo, hi, ts, ws, state);
    }
    if (n_chunks == 1) write_output(state, b, s, r_pad, out);
  });
  if (n_chunks == 1) return;
  for (std::int64_t g = 0; g < s.n_kv_heads; ++g) {
    const SoftmaxState total = partial(g * n_chunks);
    for (std::int64_t c = 1; c < n_chunks; ++c) merge_state(total, partial(g * n_chunks + c), hd, r_pad, softmax_scale(s));
    write_output(total, QueryBlock{0, 1, g}, s, r_pad, out);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(PrefillImpl);
HWY_EXPORT(DecodeImpl);

namespace {

bool use_pool(const ThreadPool& pool, std::int64_t macs, std::int64_t min_parallel_macs) {
  return pool.n_threads() > 1 && macs >= min_parallel_macs;
}

// Σ_i min(p0 + i + 1, window) over the n_q rows of a run at p0 (window 0: no limit): the keys
// the rows see (a tree's masked scores are computed, then dropped, so it counts as causal).
std::int64_t visible_keys(std::int64_t p0, std::int64_t n_q, std::int64_t window) {
  const std::int64_t full = n_q * p0 + n_q * (n_q + 1) / 2;
  if (window <= 0 || p0 + n_q <= window) return full;
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < n_q; ++i) n += std::min(p0 + i + 1, window);
  return n;
}

}  // namespace

void attention_prefill(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t p0,
                       std::int64_t n_q, const AttentionShape& s, float* out, ThreadPool& pool,
                       std::int64_t min_parallel_macs, const std::uint8_t* mask) {
  const std::int64_t visible = visible_keys(p0, n_q, s.window);
  const bool parallel = use_pool(pool, 2 * visible * s.n_heads * s.head_dim, min_parallel_macs);
  HWY_DYNAMIC_DISPATCH(PrefillImpl)(q, k, v, p0, n_q, mask, s, out, pool, parallel);
}

void attention_decode(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t n_ctx,
                      const AttentionShape& s, float* out, ThreadPool& pool,
                      std::int64_t min_parallel_macs) {
  const std::int64_t visible = s.window > 0 ? std::min(n_ctx, s.window) : n_ctx;
  const bool parallel = use_pool(pool, 2 * visible * s.n_heads * s.head_dim, min_parallel_macs);
  HWY_DYNAMIC_DISPATCH(DecodeImpl)(q, k, v, n_ctx, s, out, pool, parallel);
}

}  // namespace peregrine
#endif  // HWY_ONCE

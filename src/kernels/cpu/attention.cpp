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
// K/V tiles come from the paged cache through a KvLayerView: a tile of positions is a list of
// runs of f32 rows with a stride ("tile runs"). f32 blocks of >= kMinDirectRows rows are read
// in place, one run per block the tile touches; smaller f32 blocks, f16, q8_0 and the per-token
// scaled i8 / f8 rows are widened into one contiguous f32 run in the workspace. The score product walks the K runs
// (register blocks of rows within a run); the value product reads V through one row pointer
// per key, so the tile's ot is loaded, rescaled and stored once whatever the block size.

#include "peregrine/kernels/cpu/attention.h"

#include <algorithm>
#include <atomic>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>

#include "peregrine/quant/fp8.h"

#ifndef PEREGRINE_KERNELS_CPU_ATTENTION_SHARED_
#define PEREGRINE_KERNELS_CPU_ATTENTION_SHARED_
namespace peregrine::attention_detail {

// KV positions per softmax update: a [kKvTile, lanes] score tile stays in L1.
inline constexpr std::int64_t kKvTile = 64;

// f32 blocks of at least this many rows are read in place; smaller ones are gathered (a run per
// row or two would cost more in per-run overhead than the copy).
inline constexpr std::int64_t kMinDirectRows = 8;

// Rows of a KV tile as f32: runs of n_rows rows `stride` floats apart, in position order.
struct RowRun {
  const float* p;
  std::size_t stride, n_rows;
};
struct TileRuns {
  std::array<RowRun, kKvTile> runs;
  std::size_t n = 0;
};

// Buffers of one thread: the query block (qt [head_dim, r_pad], qpos [r_pad], the first slot
// each lane sees under a sliding window qlo [r_pad]), a score tile
// st [kKvTile, r_pad], the per-tile rescale corr [r_pad], a softmax state (ot, m, l) for calls
// that do not keep it in a shared partials buffer, and the widened K/V tiles kbuf, vbuf
// [kKvTile, head_dim] with a row buffer row_tmp [kv_dim] (q8_0 rows whose heads do not start
// on a block). r_pad is a multiple of the vector length, so every row starts vector-aligned.
struct Workspace {
  Workspace(std::int64_t head_dim, std::int64_t r_pad, std::int64_t kv_dim)
      : r_pad(r_pad),
        buf(hwy::AllocateAligned<float>(static_cast<std::size_t>((2 * head_dim + kKvTile + 5) * r_pad +
                                                                  2 * kKvTile * head_dim + kv_dim))),
        qt(buf.get()),
        ot(qt + head_dim * r_pad),
        st(ot + head_dim * r_pad),
        qpos(st + kKvTile * r_pad),
        qlo(qpos + r_pad),
        m(qlo + r_pad),
        l(m + r_pad),
        corr(l + r_pad),
        kbuf(corr + r_pad),
        vbuf(kbuf + kKvTile * head_dim),
        row_tmp(vbuf + kKvTile * head_dim) {}
  std::int64_t r_pad;
  hwy::AlignedFreeUniquePtr<float[]> buf;
  float *qt, *ot, *st, *qpos, *qlo, *m, *l, *corr, *kbuf, *vbuf, *row_tmp;
  TileRuns k_runs, v_runs;
  std::array<const float*, kKvTile> vrows;  // the tile's V rows, one pointer per key
};

// Calls fn(j, row, n_rows) for each run of positions [t, t + n) that lies in one block of
// `view`: tile rows j .. j + n_rows - 1, the first of them at address `row`.
template <class Fn>
void for_each_block_run(const KvLayerView& view, std::int64_t t, std::int64_t n, const Fn& fn) {
  for (std::int64_t j = 0; j < n;) {
    const std::int64_t pos = t + j, n_rows = std::min<std::int64_t>(view.block_size - pos % view.block_size, n - j);
    fn(j, view.row(pos), n_rows);
    j += n_rows;
  }
}

// Where one KV head's values sit in a row: byte offset and length of the slice to read
// (q8_0 with head_dim % 32 != 0: the whole row), and whether the row's f32 scale at byte 0 is
// read too (i8 / f8: one scale per row, then one byte per value).
struct HeadSlice {
  std::int64_t offset, bytes;
  bool row_scale = false;
};
inline HeadSlice head_slice(const KvLayerView& view, std::int64_t kv_head, std::int64_t head_dim) {
  const std::int64_t first = kv_head * head_dim;
  switch (view.dtype) {
    case DType::kF16: return {first * 2, head_dim * 2};
    case DType::kQ8_0:
      if (head_dim % 32 != 0) return {0, view.row_bytes};
      return {first / 32 * 34, head_dim / 32 * 34};
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return {static_cast<std::int64_t>(kRowScaleBytes) + first, head_dim, true};
    default: return {first * 4, head_dim * 4};
  }
}

// The 256 values of an FP8 byte (kF8E4M3 or kF8E5M2), decoded once (quant/fp8.h).
inline const float* fp8_table(DType t) {
  auto make = [](float (*decode)(std::uint8_t)) {
    std::array<float, 256> table;
    for (int b = 0; b < 256; ++b) table[static_cast<std::size_t>(b)] = decode(static_cast<std::uint8_t>(b));
    return table;
  };
  static const std::array<float, 256> e4m3 = make(fp8_e4m3_to_f32), e5m2 = make(fp8_e5m2_to_f32);
  return t == DType::kF8E4M3 ? e4m3.data() : e5m2.data();
}

// Softmax state of one query block: ot [head_dim, r_pad], m and l [r_pad].
struct SoftmaxState {
  float *ot, *m, *l;
};

// Which query rows form a block: rows [row_begin, row_end) of a run starting at position p0,
// all query heads of KV head `kv_head`.
struct QueryBlock {
  std::int64_t row_begin, row_end, kv_head;
};

// The token-tree mask of a prefill run (SpecInfer, Miao et al. 2024): the run's rows sit at
// slots p0 .. p0 + n_q - 1, and row i sees run slot p0 + j iff mask[i * n_q + j] != 0 (slots
// before p0 are always visible, up to a sliding window). Causal runs pass no RunMask. With a
// window, `depth` holds each row's depth (its position is p0 + depth) and `mask` already drops
// the ancestors out of the window.
struct RunMask {
  const std::uint8_t* mask;
  std::int64_t p0, n_q;
  const std::int32_t* depth = nullptr;
};

// How a tile's raw scores q·k become softmax inputs and which of them are masked.
struct TileScores {
  float exp_scale;             // multiplier of (score - max) inside the exponent
  float softcap, cap_scale;    // softcap > 0: score → softcap · tanh(score · cap_scale)
  std::int64_t min_qpos;       // the block's earliest query slot (causal mask past it)
  const RunMask* tree;         // the run's tree mask, or nullptr (causal)
  std::int64_t max_lo;         // window: keys below this slot are masked for some lane (ws.qlo)
  std::int64_t lo_end;         // window: the mask applies to keys below this slot (tree: p0)
};

// Row `row` of a prefill run starting at p0 sits at position p0 + row, or p0 + its depth in a
// token tree with a window.
inline std::int64_t row_position(std::int64_t p0, const RunMask* tree, std::int64_t row) {
  return p0 + (tree != nullptr && tree->depth != nullptr ? tree->depth[row] : row);
}

// The first KV slot a query at position `pos` sees under a sliding window (0: none).
inline std::int64_t first_visible_slot(std::int64_t pos, std::int64_t window) {
  return window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
}

// With a window, the depth of every row of a tree mask [n_q, n_q] (its ancestors-or-self count
// minus one) into `depth`, and the mask without the ancestors a window or more positions above
// the row into `windowed`.
inline void window_tree_mask(const std::uint8_t* mask, std::int64_t n_q, std::int64_t window,
                             std::vector<std::int32_t>& depth, std::vector<std::uint8_t>& windowed) {
  depth.assign(static_cast<std::size_t>(n_q), 0);
  for (std::int64_t i = 0; i < n_q; ++i) {
    for (std::int64_t j = 0; j < i; ++j) depth[i] += mask[i * n_q + j] != 0;
  }
  windowed.assign(mask, mask + n_q * n_q);
  for (std::int64_t i = 0; i < n_q; ++i) {
    for (std::int64_t j = 0; j <= i; ++j) {
      if (depth[i] - depth[j] >= window) windowed[i * n_q + j] = 0;
    }
  }
}

// Runs body(item, workspace) for every item in [0, n_items): on the calling thread, or on all of
// the pool's threads taking items from a shared counter (items of unequal cost balance out).
template <class Body>
void run_items(ThreadPool& pool, bool parallel, std::int64_t n_items, const AttentionShape& s,
               std::int64_t r_pad, const Body& body) {
  std::atomic<std::int64_t> next{0};
  const std::int64_t n_workers = parallel ? std::min<std::int64_t>(pool.n_threads(), n_items) : 1;
  pool.parallel_for(n_workers, [&](std::int64_t, std::int64_t) {
    Workspace ws(s.head_dim, r_pad, s.n_kv_heads * s.head_dim);
    for (std::int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      body(item, ws);
    }
  });
}

}  // namespace peregrine::attention_detail
#endif  // PEREGRINE_KERNELS_CPU_ATTENTION_SHARED_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/cpu/float_weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace attention_detail;  // NOLINT(google-build-using-namespace)

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

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

// Attention-score soft-capping (Gemma 2): st → softcap · tanh(st · cap_scale) for the n_keys
// score rows of a tile.
void softcap_scores(std::size_t n_keys, std::size_t r_pad, float softcap, float cap_scale, float* HWY_RESTRICT st) {
  const D d;
  const V cap = hn::Set(d, softcap), in_scale = hn::Set(d, cap_scale);
  for (std::size_t i = 0; i < n_keys * r_pad; i += hn::Lanes(d)) {
    hn::Store(hn::Mul(cap, hn::Tanh(d, hn::Mul(hn::Load(d, st + i), in_scale))), d, st + i);
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
  std::size_t j = 0;
  for (std::size_t r = 0; r < ws.v_runs.n; ++r) {
    const RowRun& run = ws.v_runs.runs[r];
    for (std::size_t i = 0; i < run.n_rows; ++i) ws.vrows[j++] = run.p + i * run.stride;
  }
  for_blocks(head_dim, n_vecs, [&]<std::size_t kR, std::size_t kV>(std::size_t i, std::size_t x) {
    value_block<kR, kV>(ws.vrows.data(), i, ws.st + x * n, n_keys, r_pad, ws.corr + x * n, state.ot + i * r_pad + x * n);
  });
}

// out[0, 32 · n_blocks) = the q8_0 blocks at src widened to f32 (x = d · q).
void dequantize_q8_0(const std::uint8_t* src, std::int64_t n_blocks, float* HWY_RESTRICT out) {
  const D d;
  const hn::Rebind<std::int8_t, D> d8;
  const hn::RebindToSigned<D> di;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t b = 0; b < n_blocks; ++b, src += 34, out += 32) {
    const V scale = hn::Set(d, ScalarAsF32(reinterpret_cast<const hwy::float16_t*>(src)));
    const auto* q = reinterpret_cast<const std::int8_t*>(src + 2);
    for (std::int64_t i = 0; i < 32; i += n) {
      hn::StoreU(hn::Mul(scale, hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + i)))), d, out + i);
    }
  }
}

// out[0, n) = n f16 values at src widened to f32.
void widen_f16(const std::uint8_t* src, std::int64_t n_values, float* HWY_RESTRICT out) {
  const D d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  const auto* h = reinterpret_cast<const hwy::float16_t*>(src);
  std::int64_t i = 0;
  for (; i + n <= n_values; i += n) hn::StoreU(LoadAsF32(d, h + i), d, out + i);
  for (; i < n_values; ++i) out[i] = ScalarAsF32(h + i);
}

// One vector of FP8 bytes at p as f32, exactly, through f16 (F16C): an E5M2 byte is the top
// byte of the f16 of the same value; E4M3's 7 magnitude bits go 3 bits lower, into an f16
// whose exponent bias (15) exceeds E4M3's (7) by 8, so the widened value times 2^8 is exact
// (E4M3 subnormals become f16 subnormals). E4M3's NaN (magnitude 0x7f) lands on ±480, which
// no E4M3 byte encodes, and is replaced by NaN.
V widen_fp8(DType t, const std::uint8_t* HWY_RESTRICT p) {
  const D d;
  const hn::Rebind<std::uint8_t, D> du8;
  const hn::Rebind<std::uint16_t, D> du16;
  const hn::Rebind<hwy::float16_t, D> df16;
  const auto b = hn::PromoteTo(du16, hn::LoadU(du8, p));
  if (t == DType::kF8E5M2) return hn::PromoteTo(d, hn::BitCast(df16, hn::ShiftLeft<8>(b)));
  const auto h = hn::Or(hn::ShiftLeft<7>(hn::And(b, hn::Set(du16, 0x7f))), hn::ShiftLeft<8>(hn::And(b, hn::Set(du16, 0x80))));
  const V x = hn::Mul(hn::PromoteTo(d, hn::BitCast(df16, h)), hn::Set(d, 256.0f));
  return hn::IfThenElse(hn::Eq(hn::Abs(x), hn::Set(d, 480.0f)), hn::Set(d, NAN), x);
}

// out[0, n) = s · value(b) for the n bytes b at `values` of an i8 / f8 row whose f32 scale s
// starts the row at `row` (i8: the signed byte; f8: its FP8 value, widen_fp8 or, for the
// tail, the decode table). The same products as quant/dequantize, so the reference reads
// identical values.
void widen_row_scaled(DType t, const std::uint8_t* row, const std::uint8_t* values, std::int64_t n_values,
                      float* HWY_RESTRICT out) {
  const D d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  float s;
  std::memcpy(&s, row, sizeof s);
  const V scale = hn::Set(d, s);
  std::int64_t i = 0;
  if (t == DType::kI8) {
    const hn::RebindToSigned<D> di;
    const hn::Rebind<std::int8_t, D> d8;
    const auto* q = reinterpret_cast<const std::int8_t*>(values);
    for (; i + n <= n_values; i += n) hn::StoreU(hn::Mul(scale, hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + i)))), d, out + i);
    for (; i < n_values; ++i) out[i] = s * static_cast<float>(q[i]);
    return;
  }
  for (; i + n <= n_values; i += n) hn::StoreU(hn::Mul(scale, widen_fp8(t, values + i)), d, out + i);
  const float* table = fp8_table(t);
  for (; i < n_values; ++i) out[i] = s * table[values[i]];
}

// out[0, head_dim) = the values of KV head `kv_head` in `row` (a row of view.dtype) as f32.
void widen_head(const KvLayerView& view, const std::uint8_t* row, std::int64_t kv_head, std::int64_t head_dim,
                float* row_tmp, float* HWY_RESTRICT out) {
  const HeadSlice slice = head_slice(view, kv_head, head_dim);
  switch (view.dtype) {
    case DType::kF16: return widen_f16(row + slice.offset, head_dim, out);
    case DType::kQ8_0:
      if (head_dim % 32 == 0) return dequantize_q8_0(row + slice.offset, head_dim / 32, out);
      dequantize_q8_0(row, view.row_bytes / 34, row_tmp);
      std::copy_n(row_tmp + kv_head * head_dim, head_dim, out);
      return;
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return widen_row_scaled(view.dtype, row, row + slice.offset, head_dim, out);
    default: std::memcpy(out, row + slice.offset, static_cast<std::size_t>(head_dim) * sizeof(float));
  }
}

// Lays out the rows of KV head `kv_head` at positions [t, t + n_keys) of `view` as f32 runs:
// in place for f32 blocks of >= kMinDirectRows rows, else widened into buf [n_keys, head_dim].
void load_tile(const KvLayerView& view, std::int64_t kv_head, std::int64_t head_dim, std::int64_t t,
               std::int64_t n_keys, float* buf, float* row_tmp, TileRuns& out) {
  out.n = 0;
  if (view.dtype == DType::kF32 && view.block_size >= kMinDirectRows) {
    const auto stride = static_cast<std::size_t>(view.row_bytes) / sizeof(float);
    for_each_block_run(view, t, n_keys, [&](std::int64_t, const std::uint8_t* row, std::int64_t n_rows) {
      out.runs[out.n++] = {reinterpret_cast<const float*>(row) + kv_head * head_dim, stride, static_cast<std::size_t>(n_rows)};
    });
    return;
  }
  for_each_block_run(view, t, n_keys, [&](std::int64_t j, const std::uint8_t* row, std::int64_t n_rows) {
    for (std::int64_t r = 0; r < n_rows; ++r) widen_head(view, row + r * view.row_bytes, kv_head, head_dim, row_tmp, buf + (j + r) * head_dim);
  });
  out.runs[out.n++] = {buf, static_cast<std::size_t>(head_dim), static_cast<std::size_t>(n_keys)};
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

// Prefetches the rows [begin, end) of one KV head in `view`: a decode tile takes ~2 µs, so
// fetching the next tile's rows while computing this one hides the memory latency of the
// strided per-head rows (n_ctx 8192 decode: ~2.0 → ~1.4 ms, measured).
void prefetch_rows(const KvLayerView& view, std::int64_t kv_head, std::int64_t head_dim, std::int64_t begin,
                   std::int64_t end) {
  if (begin >= end) return;
  const HeadSlice slice = head_slice(view, kv_head, head_dim);
  for_each_block_run(view, begin, end - begin, [&](std::int64_t, const std::uint8_t* row, std::int64_t n_rows) {
    for (std::int64_t r = 0; r < n_rows; ++r) {
      const std::uint8_t* p = row + r * view.row_bytes;
      if (slice.row_scale) hwy::Prefetch(p);
      for (std::int64_t b = 0; b < slice.bytes; b += 64) hwy::Prefetch(p + slice.offset + b);
    }
  });
}

// Attends the block loaded in ws to KV positions [begin, end) of KV head `kv_head`, scores as
// `ts` says.
void attend_range(const KvLayerView& k, const KvLayerView& v, const AttentionShape& s, std::int64_t kv_head,
                  std::int64_t begin, std::int64_t end, const TileScores& ts, Workspace& ws,
                  const SoftmaxState& state) {
  for (std::int64_t t = begin; t < end; t += kKvTile) {
    const std::int64_t n_keys = std::min(kKvTile, end - t), next_end = std::min(end, t + 2 * kKvTile);
    prefetch_rows(k, kv_head, s.head_dim, t + kKvTile, next_end);
    prefetch_rows(v, kv_head, s.head_dim, t + kKvTile, next_end);
    load_tile(k, kv_head, s.head_dim, t, n_keys, ws.kbuf, ws.row_tmp, ws.k_runs);
    load_tile(v, kv_head, s.head_dim, t, n_keys, ws.vbuf, ws.row_tmp, ws.v_runs);
    attend_tile(t, static_cast<std::size_t>(n_keys), static_cast<std::size_t>(s.head_dim), ts, ws, state);
  }
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
  run_items(pool, parallel, n_blocks * s.n_kv_heads, s, r_pad, [&](std::int64_t item, Workspace& ws) {
    const std::int64_t block = n_blocks - 1 - item / s.n_kv_heads;  // longest KV ranges first
    const QueryBlock b{block * rows_per_block, std::min(n_q, (block + 1) * rows_per_block), item % s.n_kv_heads};
    load_queries(q, p0, run_tree, b, s, ws);
    const SoftmaxState state = workspace_state(ws);
    init_state(s.head_dim, r_pad, state);
    const auto [begin, max_lo] = block_window(p0, run_tree, b, s.window);
    const TileScores ts = tile_scores(s, p0 + b.row_begin, run_tree, max_lo, run_tree != nullptr ? p0 : INT64_MAX);
    attend_range(k, v, s, b.kv_head, begin, p0 + b.row_end, ts, ws, state);
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

void DecodeImpl(const float* q, const KvLayerView& k, const KvLayerView& v, std::int64_t n_ctx,
                const AttentionShape& s, float* out, ThreadPool& pool, bool parallel) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim, r_pad = padded_lanes(group);
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
  run_items(pool, parallel, s.n_kv_heads * n_chunks, s, r_pad, [&](std::int64_t item, Workspace& ws) {
    const QueryBlock b{0, 1, item / n_chunks};
    const std::int64_t chunk = item % n_chunks;
    load_queries(q, n_ctx - 1, nullptr, b, s, ws);
    const SoftmaxState state = n_chunks > 1 ? partial(item) : workspace_state(ws);
    init_state(hd, r_pad, state);
    attend_range(k, v, s, b.kv_head, begin + chunk * chunk_len, std::min(n_ctx, begin + (chunk + 1) * chunk_len), ts, ws, state);
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

// Target-independent pieces of the attention kernels (attention.cpp and its -inl.h parts):
// the KV tile constants, the per-thread Workspace, softmax-state and mask descriptors, and the
// item loop over the thread pool.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/attention/attention.h"
#include "peregrine/quant/fp8.h"

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
// The head-rows decode kernel (attention_head_rows-inl.h) also takes the query heads and their
// outputs as rows qrow, orow [r_pad, row_pad] (row_pad: head_dim rounded up to a multiple of the
// vector length; 0 for the other kernels, which need no such rows).
struct Workspace {
  Workspace(std::int64_t head_dim, std::int64_t r_pad, std::int64_t kv_dim, std::int64_t row_pad)
      : r_pad(r_pad),
        row_pad(row_pad),
        buf(hwy::AllocateAligned<float>(static_cast<std::size_t>((2 * head_dim + kKvTile + 5) * r_pad +
                                                                  2 * kKvTile * head_dim + kv_dim + 2 * r_pad * row_pad))),
        qt(buf.get()),
        ot(qt + head_dim * r_pad),
        st(ot + head_dim * r_pad),
        qpos(st + kKvTile * r_pad),
        qlo(qpos + r_pad),
        m(qlo + r_pad),
        l(m + r_pad),
        corr(l + r_pad),
        qrow(corr + r_pad),
        orow(qrow + r_pad * row_pad),
        kbuf(orow + r_pad * row_pad),
        vbuf(kbuf + kKvTile * head_dim),
        row_tmp(vbuf + kKvTile * head_dim) {}
  std::int64_t r_pad, row_pad;
  hwy::AlignedFreeUniquePtr<float[]> buf;
  float *qt, *ot, *st, *qpos, *qlo, *m, *l, *corr, *qrow, *orow, *kbuf, *vbuf, *row_tmp;
  TileRuns k_runs, v_runs;
  std::array<const float*, kKvTile> krows, vrows;  // the tile's K and V rows, one pointer per key
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

// Runs body(item, workspace) (Workspace sized by r_pad and row_pad) for every item in [0, n_items): on the calling thread, or on all of
// the pool's threads taking items from a shared counter (items of unequal cost balance out).
template <class Body>
void run_items(ThreadPool& pool, bool parallel, std::int64_t n_items, const AttentionShape& s,
               std::int64_t r_pad, std::int64_t row_pad, const Body& body) {
  std::atomic<std::int64_t> next{0};
  const std::int64_t n_workers = parallel ? std::min<std::int64_t>(pool.n_threads(), n_items) : 1;
  pool.parallel_for(n_workers, [&](std::int64_t, std::int64_t) {
    Workspace ws(s.head_dim, r_pad, s.n_kv_heads * s.head_dim, row_pad);
    for (std::int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      body(item, ws);
    }
  });
}

}  // namespace peregrine::attention_detail

// Paged KV cache (PagedAttention, Kwon et al. 2023): keys and values of every processed
// position live in fixed-size blocks of `block_size` positions drawn from one pool; each
// sequence owns a block table (logical block i → pool block id) and a valid length. Blocks are
// reference counted, so sequences can share prefix blocks; a write into a shared block first
// copies it (copy-on-write). K/V are stored as f32, f16, q8_0 (GGUF Q8_0 blocks of 32 along
// each position's kv_dim row: one scale per 32 values), i8 (per-token int8: one f32 scale per
// position's kv_dim row, then an int8 per value) or f8_e4m3 / f8_e5m2 (the same per-token scale,
// then an FP8 byte per value; layouts in core/dtype.h), and widened to f32 by the attention
// kernels. Rows are encoded by round-to-nearest (quant/quantize_rtn.h); the per-token scale is
// ZeroQuant's token-wise activation quantization (Yao et al. 2022) applied to each K/V row, so
// no calibration is needed (vLLM's FP8 KV cache uses per-tensor scales instead).
//
// Layers attending through a sliding window form their own KV cache groups (kv_layer_groups.h):
// each group has its own block table per sequence, and release_behind_window frees a window
// group's blocks that no later query can see. Every group draws blocks of layers_per_group
// layers from the one pool.
//
// Storage per layer slot of a group: K and V each [pool blocks, block_size, kv_dim] in the KV
// dtype (kv_dim = n_kv_heads * head_dim). Not thread-safe: one owner (the engine's step loop,
// or a single generate call) drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/kv/block_pool.h"
#include "peregrine/kv/kv_layer_groups.h"
#include "peregrine/kv/kv_layer_view.h"
#include "peregrine/kv/kv_shape.h"

namespace peregrine {

/// Positions per block unless a caller picks another size (vLLM's default).
inline constexpr std::int32_t kDefaultKvBlockSize = 16;

/// A block table entry whose block a sliding-window group released (release_behind_window).
inline constexpr std::int32_t kReleasedBlock = -1;

struct KvCacheOptions {
  std::int32_t n_blocks = 0;     // pool size (>= 1) in blocks of block_size positions across
                                 // every layer; the pool holds n_blocks · n_groups group blocks
  std::int32_t block_size = kDefaultKvBlockSize;  // positions per block (>= 1)
  DType dtype = DType::kF32;     // kF32, kF16, kQ8_0, kI8, kF8E4M3 or kF8E5M2
  /// false: one group of every layer whatever their windows (nothing is ever released), for
  /// caches that must mirror another process's block tables while holding other layers
  /// (pipeline stages: `serve --pp`).
  bool window_groups = true;
};

/// "f32" | "f16" | "q8_0" | "i8" | "f8_e4m3" | "f8_e5m2" → DType. Errors: kInvalidArgument
/// naming the accepted values.
Expected<DType> parse_kv_type(std::string_view name);

/// Bytes of one block across all layers, K and V: 2 · n_layers · block_size · row bytes of
/// kv_dim values in `dtype` (f32 4 B, f16 2 B, q8_0 34 B per 32 values; i8 / f8 4 B of scale
/// + 1 B per value).
std::int64_t kv_block_bytes(const KvShape& shape, std::int32_t block_size, DType dtype);

/// Blocks that hold `n_tokens` positions: ceil(n_tokens / block_size).
std::int64_t blocks_for_tokens(std::int64_t n_tokens, std::int32_t block_size);

class KvCache {
 public:
  /// A pool of options.n_blocks blocks for `shape`'s layers and KV rows (n_blocks · n_groups
  /// blocks of one group's layers each).
  /// Errors: kInvalidArgument (n_blocks < 1, block_size < 1, dtype not one of the KV types
  /// above; q8_0 when kv_dim is not a multiple of 32; a window < 0), kOutOfRange (the pool needs more bytes than this
  /// machine's physical memory; the message says how many GiB).
  static Expected<KvCache> create(const KvShape& shape, const KvCacheOptions& options);

  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;

  std::int32_t block_size() const;
  DType dtype() const;
  std::int64_t kv_dim() const;
  std::int64_t n_layers() const;
  /// The pool of group blocks (each holds block_size positions of one group's layers).
  BlockPool& pool();
  const BlockPool& pool() const;
  /// KV cache groups (kv_layer_groups.h): 1 unless some layers attend through a window.
  std::int32_t n_groups() const { return groups_.n_groups(); }
  /// Group `group`'s sliding window (0: full attention).
  std::int64_t group_window(std::int32_t group) const { return groups_.group_windows[static_cast<std::size_t>(group)]; }

  // --- sequences (ids are any int32 the caller chooses) ---
  bool has_sequence(std::int32_t seq) const;
  /// Valid positions [0, length) of `seq` (0 for an unknown sequence).
  std::int64_t length(std::int32_t seq) const;
  /// The block table of `seq` in `group` (empty for an unknown sequence); entries a window
  /// group released are kReleasedBlock.
  std::span<const std::int32_t> block_table(std::int32_t seq, std::int32_t group = 0) const;
  /// Every group's table of `seq`, position-major: entry i · n_groups() + g is group g's block
  /// holding positions [i · block_size, (i + 1) · block_size) (what attach_prefix takes).
  std::vector<std::int32_t> blocks_by_position(std::int32_t seq) const;
  /// Blocks `seq` holds in `group` (its table's entries that are not released).
  std::int64_t held_blocks(std::int32_t seq, std::int32_t group) const;

  /// Makes positions [length(seq), n_positions) of `seq` writable in every group: creates the
  /// sequence if needed, allocates the missing blocks and copies every shared block (ref count > 1) the
  /// range touches (copy-on-write). All or nothing: on error nothing changes.
  /// Errors: kResourceExhausted (not enough free blocks; the message gives needed and free);
  /// on a follower (follow) kInternal when the table does not cover the positions.
  Status reserve(std::int32_t seq, std::int64_t n_positions);
  /// Blocks reserve(seq, n_positions) would take from the pool (new + copied).
  std::int64_t blocks_needed(std::int32_t seq, std::int64_t n_positions) const;

  /// Starts sequence `seq` (must not exist) with shared prefix `blocks` (position-major as
  /// blocks_by_position; kReleasedBlock where a window group needs none) holding its first
  /// `n_tokens` positions (n_tokens <= blocks.size() / n_groups() * block_size). Takes over one
  /// reference per block from the caller (PrefixCache::match hands out such references).
  void attach_prefix(std::int32_t seq, std::span<const std::int32_t> blocks, std::int64_t n_tokens);

  /// Keeps positions [0, n) of `seq` (n <= length) and releases the blocks past them
  /// (speculative rollback, preemption of a tail).
  void truncate(std::int32_t seq, std::int64_t n);
  /// Starts sequence `dst` (must not exist) as a copy of `src` (must exist) that shares every
  /// block of it (one more reference each): a later write into a shared block copies it first
  /// (reserve's copy-on-write). O(blocks). Used to branch a draft tree into chains.
  void fork(std::int32_t src, std::int32_t dst);
  /// Speculative commit: moves the K/V rows at positions `from` (strictly increasing, each
  /// from[j] >= first + j, all < length(seq)) of every layer to positions first, first + 1, ...
  /// and truncates `seq` to first + from.size(), releasing the blocks past it. Keeps the rows
  /// of an accepted token-tree path and drops the rejected nodes. Precondition: the blocks of
  /// positions >= first are not shared (a forward wrote them after reserve).
  void compact(std::int32_t seq, std::int64_t first, std::span<const std::int64_t> from);
  /// Releases every block of `seq` and forgets it (no-op for an unknown sequence).
  void free_sequence(std::int32_t seq);
  /// Releases the blocks of `seq`'s sliding-window groups that no query at a position >= `pos`
  /// sees (every position of the block < pos - window + 1); their table entries become
  /// kReleasedBlock. Precondition: no later forward of `seq` starts below `pos` (the positions
  /// below are committed), so nothing truncates it below `pos` (vLLM's SlidingWindowManager
  /// frees the same blocks).
  void release_behind_window(std::int32_t seq, std::int64_t pos);
  /// What a follower cache needs before it runs the same forward as this one
  /// (engine/forward_mirror.h: other processes running every forward of an engine): the
  /// sequences freed and the copy-on-write block copies made since the last update, in order,
  /// and the block table and length of each sequence the forward will touch.
  struct FollowerUpdate {
    struct Table {
      std::int32_t seq;
      std::int64_t length;
      std::vector<std::int32_t> blocks;  // position-major, as blocks_by_position
    };
    std::vector<std::int32_t> freed;
    std::vector<std::pair<std::int32_t, std::int32_t>> copies;  // (from, to) block ids
    std::vector<Table> tables;
  };
  /// Starts recording frees and copies for take_follower_update.
  void record_for_followers() { record_ = true; }
  /// The update since the last call, with the tables of `seqs` (duplicates allowed) as they are now.
  FollowerUpdate take_follower_update(std::span<const std::int32_t> seqs);
  /// Makes this cache follow another of the same shape: it applies `u` (forgets the freed
  /// sequences, replays the copies, takes the tables as they are) and from then on allocates
  /// nothing itself — reserve only checks that a table covers the positions, and its pool is
  /// not used — so its blocks hold what the other cache's hold after each same forward.
  void follow(const FollowerUpdate& u);

  /// Stores one position's K and V rows (each kv_dim f32, after RoPE) of `layer` for `seq` at
  /// `pos`, converting to the KV dtype (round-to-nearest as quantize_rtn; i8 / f8: one scale for
  /// the whole kv_dim row, absmax / 127 or absmax / the FP8 format's max). Precondition:
  /// reserve(seq, pos + 1) succeeded.
  void write(std::int32_t seq, std::int64_t layer, std::int64_t pos, const float* k, const float* v);
  /// Bytes of one position's K (or V) row of one layer in the KV dtype (kv_dim values).
  std::int64_t row_bytes() const { return row_bytes_; }
  /// Copies the stored K rows, then the V rows, of positions [first, first + n) of `layer` of
  /// `seq` into `out` (2 · n · row_bytes() bytes, in the KV dtype, position-major): what a
  /// disaggregated prefill instance ships (dist/kv_transfer.h). Precondition: the positions
  /// were written (reserve'd and computed).
  void read_rows(std::int32_t seq, std::int64_t layer, std::int64_t first, std::int64_t n, std::uint8_t* out) const;
  /// The inverse of read_rows on another cache of the same model and KV dtype: stores `in`
  /// (2 · n · row_bytes() bytes: K rows, then V rows) at positions [first, first + n) of
  /// `layer` of `seq`, as they are (no conversion). Precondition: reserve(seq, first + n)
  /// succeeded; length(seq) is left as is (set_length).
  void write_rows(std::int32_t seq, std::int64_t layer, std::int64_t first, std::int64_t n, const std::uint8_t* in);
  /// Sets length(seq) = n after a forward wrote positions up to n - 1.
  void set_length(std::int32_t seq, std::int64_t n);

  /// K / V of `seq` at `layer` for the attention kernels (valid until the table changes).
  KvLayerView k_view(std::int32_t seq, std::int64_t layer) const;
  KvLayerView v_view(std::int32_t seq, std::int64_t layer) const;

  /// What a device backend keeps with this cache (backend/cuda_forward.h: its K/V slabs in GPU
  /// memory, in this cache's layout and block ids), type-erased; null until a device forward
  /// first uses the cache. Moves with the cache. fork / attach_prefix / compact and
  /// copy-on-write move host rows only.
  std::shared_ptr<void>& device_storage() { return device_storage_; }

 private:
  struct Sequence {
    std::vector<std::vector<std::int32_t>> tables;  // [group][logical block]
    std::int64_t length = 0;
  };
  KvCache() = default;
  std::uint8_t* slab(std::int64_t layer, int kv) const;  // kv 0: K, 1: V; block 0 of the layer
  void copy_block(std::int32_t from, std::int32_t to);   // the K and V rows of the block's layers
  const Sequence* find(std::int32_t seq) const;
  std::int64_t table_blocks_needed(std::span<const std::int32_t> table, std::int64_t length, std::int64_t n_positions) const;
  void reserve_table(std::vector<std::int32_t>& table, std::int64_t length, std::int64_t n_positions);
  void set_tables(Sequence& s, std::span<const std::int32_t> by_position) const;

  KvLayerGroups groups_;
  std::int64_t n_layers_ = 0, kv_dim_ = 0, row_bytes_ = 0;
  std::int32_t block_size_ = 0;
  DType dtype_ = DType::kF32;
  BlockPool pool_{0};
  // [n_layers, 2 (K, V), n_blocks, block_size, row_bytes]; pages are touched on first write.
  std::unique_ptr<std::uint8_t[]> data_;
  std::unordered_map<std::int32_t, Sequence> seqs_;
  bool record_ = false;    // record_for_followers
  bool follower_ = false;  // follow was called
  FollowerUpdate update_;  // since the last take_follower_update (tables empty)
  std::shared_ptr<void> device_storage_;
};

}  // namespace peregrine

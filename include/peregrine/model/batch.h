// The ragged batch: the one input of Model::forward (prefill, decode, chunked prefill, mixed
// batches and speculative verification are all Batches).
#pragma once

#include <cstdint>
#include <vector>

namespace peregrine {

/// n flattened rows; row i is token `tokens[i]` of sequence `seq_ids[i]` at absolute position
/// `positions[i]` (0-based). Rows of one sequence must be in increasing, consecutive position
/// order, unless they form a token tree (below). Attention is causal by position: a row sees
/// every earlier position of its own sequence (from the KV cache and from this batch) and
/// itself. `need_logits[i]` != 0 asks for that row's logits (prefill usually wants only the
/// last row).
///
/// Token trees (speculative verification with tree attention; SpecInfer, Miao et al. 2024):
/// `parents` is empty (every row is a plain row) or holds one entry per row. parents[i] == -1
/// is a plain row: it follows the previous row of its sequence in this batch (or the cached
/// positions when it is the sequence's first row). parents[i] = j >= 0 makes row j (an earlier
/// row of the same sequence) its parent: positions[i] must be positions[j] + 1, and row i sees
/// the sequence's cached positions before its first row, its ancestors in this batch and
/// itself, never its siblings or their subtrees; a sequence with tree rows has all its rows
/// contiguous in the batch. The K/V of a sequence's rows go to consecutive cache slots
/// starting at its first row's position, in row order, whatever their positions; so after a
/// tree forward the cache length is first position + rows, and the caller keeps an accepted
/// path with KvCache::compact.
struct Batch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> positions;
  std::vector<std::int32_t> seq_ids;
  std::vector<std::uint8_t> need_logits;
  std::vector<std::int32_t> parents;
  /// Per row, the LoRA slot of the forward's LoraSet (model/lora_set.h) to apply, -1 for the
  /// base model alone; empty: every row is the base model's.
  std::vector<std::int32_t> lora_slots;
  /// The KV cache's owner already made every row's slot writable and set each sequence's
  /// length to its last slot + 1 (plan_batch_kv, model/batch_kv_plan.h): the forward only writes
  /// rows. false: the forward plans the batch itself (reserve_batch_kv).
  bool kv_planned = false;

  /// Appends one row; `parent` >= 0 is the batch row index of its tree parent (fills
  /// `parents` with -1 for the earlier rows on first use).
  void add(std::int32_t token, std::int32_t position, std::int32_t seq_id, bool logits,
           std::int32_t parent = -1);
  std::int64_t size() const { return static_cast<std::int64_t>(tokens.size()); }
  /// Number of rows with need_logits set (rows of forward's logits output).
  std::int64_t n_logits() const;
  void clear();
};

}  // namespace peregrine

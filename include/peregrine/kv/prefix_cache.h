// Prefix caching (automatic prefix caching as in vLLM; RadixAttention, Zheng et al. 2024): a
// radix tree over FULL KV blocks keyed by their token ids. A node is one block: the path from
// the root spells the tokens [0, depth · block_size) that the block's K/V were computed from,
// so a new request whose prompt starts with the same tokens attaches those blocks instead of
// recomputing them. KV values depend only on the token prefix, so reuse is exact under any
// sampling and any suffix.
//
// The cache holds one reference to each cached block. A block that only the cache references
// is evictable; eviction takes least-recently-used leaves first (a parent is only evicted after
// its children). Not thread-safe (owned by the engine's step loop).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "peregrine/kv/kv_cache.h"

namespace peregrine {

class PrefixCache {
 public:
  /// A cache over `cache`'s blocks (kept by reference: `cache` must outlive this).
  explicit PrefixCache(KvCache& cache);
  /// Drops the cache's references (clear()).
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  /// Cached blocks spelling the longest prefix of `tokens` in whole blocks, at most
  /// `max_blocks` of them (callers pass (len - 1) / block_size so at least one prompt token
  /// is left to compute the first logits from), position-major over the cache's groups as
  /// KvCache::blocks_by_position lays them out. With sliding-window groups the prefix is the
  /// longest whose window groups still hold every block the next position's window sees; their
  /// older blocks are returned as kReleasedBlock. Each returned block carries one new reference
  /// for the caller (hand them to KvCache::attach_prefix). Marks the path most recently used
  /// and counts tokens queried / hit for the hit rate. `ns` >= 0 names a namespace whose blocks
  /// only its own lookups see (a LoRA adapter's K/V differ from the base's for the same
  /// tokens; vLLM likewise puts the adapter id into its block hashes); -1: the base model's.
  std::vector<std::int32_t> match(std::span<const std::int32_t> tokens, std::int64_t max_blocks, std::int32_t ns = -1);

  /// Records a sequence's full blocks: `blocks` is position-major as
  /// KvCache::blocks_by_position; its position block i holds the K/V of tokens[i · block_size,
  /// (i + 1) · block_size), for i < tokens.size() / block_size (and < the blocks it lists).
  /// New nodes take a reference to each of their blocks (a released one stays kReleasedBlock).
  /// An existing node whose block differs keeps it while someone else also uses it (the
  /// sequence's duplicate stays private); if only the cache still references it, or the node
  /// lacks it, the node adopts the sequence's block and the old copy is freed (so cached nodes
  /// never sit, unevictable, above a running sequence's blocks). `ns`: as for match().
  void insert(std::span<const std::int32_t> tokens, std::span<const std::int32_t> blocks, std::int32_t ns = -1);

  /// Frees evictable nodes, least recently used leaves first, until at least `n` blocks are
  /// freed or none is left; returns how many blocks were freed.
  std::int64_t evict(std::int64_t n);

  /// Drops every node (and the cache's references).
  void clear();

  std::int64_t n_cached_blocks() const;
  /// Cached blocks referenced by nobody but the cache.
  std::int64_t n_evictable_blocks() const;
  /// Prompt tokens looked up by match() and how many of them were served from the cache.
  std::int64_t tokens_queried() const;
  std::int64_t tokens_hit() const;

 private:
  struct Node {
    std::vector<std::int32_t> blocks;  // one per KV cache group (kReleasedBlock: none); empty at the root
    Node* parent = nullptr;
    std::vector<std::int32_t> key;  // the block's tokens (the parent's map key)
    std::uint64_t last_used = 0;
    std::map<std::vector<std::int32_t>, std::unique_ptr<Node>> children;
  };
  std::vector<std::int32_t> block_key(std::span<const std::int32_t> tokens, std::size_t i, std::int32_t ns) const;
  std::int64_t count_evictable(const Node& node, bool& all) const;
  bool only_cached(const Node& node) const;     // only the cache references its blocks
  static std::int64_t n_blocks(const Node& node);  // its blocks that are not kReleasedBlock
  std::int64_t unref_blocks(const Node& node);  // drops the cache's references; returns how many
  std::int64_t window_depth(const std::vector<Node*>& path) const;

  KvCache* cache_;
  Node root_;
  std::uint64_t clock_ = 0;  // LRU time: bumped by every match / insert
  std::int64_t n_cached_ = 0, tokens_queried_ = 0, tokens_hit_ = 0;
};

}  // namespace peregrine

// The block pool of the paged KV cache (PagedAttention, Kwon et al. 2023): ids of fixed-size KV
// blocks, a free list and a reference count per block. Shared prefixes (prefix caching,
// forked sequences) hold one block through several references; a block returns to the free
// list when its last reference is dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace peregrine {

class BlockPool {
 public:
  /// `n_blocks` >= 0 blocks with ids 0 .. n_blocks - 1, all free.
  explicit BlockPool(std::int32_t n_blocks);

  /// A free block with reference count 1, or nullopt when none is free. Lowest-id-first is
  /// not promised; O(1).
  std::optional<std::int32_t> allocate();
  /// Adds a reference to an allocated block (precondition: ref_count(id) >= 1).
  void ref(std::int32_t id);
  /// Drops a reference; at 0 the block is free again (precondition: ref_count(id) >= 1).
  void unref(std::int32_t id);

  std::int32_t ref_count(std::int32_t id) const { return refs_[static_cast<std::size_t>(id)]; }
  std::int32_t n_blocks() const { return static_cast<std::int32_t>(refs_.size()); }
  std::int32_t n_free() const { return static_cast<std::int32_t>(free_.size()); }

 private:
  std::vector<std::int32_t> refs_;
  std::vector<std::int32_t> free_;  // a stack of free ids
};

}  // namespace peregrine

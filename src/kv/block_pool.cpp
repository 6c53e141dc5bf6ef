#include "peregrine/kv/block_pool.h"

#include <cassert>

namespace peregrine {

BlockPool::BlockPool(std::int32_t n_blocks) : refs_(static_cast<std::size_t>(n_blocks), 0) {
  free_.reserve(refs_.size());
  for (std::int32_t id = n_blocks - 1; id >= 0; --id) free_.push_back(id);  // block 0 on top
}

std::optional<std::int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const std::int32_t id = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(id)] = 1;
  return id;
}

void BlockPool::ref(std::int32_t id) {
  assert(ref_count(id) >= 1);
  ++refs_[static_cast<std::size_t>(id)];
}

void BlockPool::unref(std::int32_t id) {
  assert(ref_count(id) >= 1);
  if (--refs_[static_cast<std::size_t>(id)] == 0) free_.push_back(id);
}

}  // namespace peregrine

#include "peregrine/engine/lora_pool.h"

#include <algorithm>
#include <string>

namespace peregrine {

LoraPool::LoraPool(std::vector<LoraLoader> loaders, std::int32_t max_resident, DType products)
    : loaders_(std::move(loaders)), max_resident_(std::max(max_resident, 1)), set_(products) {}

// A slot to load into: a new one while there is room, else the least recently used unpinned.
std::optional<std::int32_t> LoraPool::free_slot() const {
  if (static_cast<std::int32_t>(slots_.size()) < max_resident_) return static_cast<std::int32_t>(slots_.size());
  std::optional<std::int32_t> best;
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    if (slots_[k].pins == 0 && (!best || slots_[k].last_used < slots_[static_cast<std::size_t>(*best)].last_used)) {
      best = static_cast<std::int32_t>(k);
    }
  }
  return best;
}

Expected<std::optional<std::int32_t>> LoraPool::acquire(std::int32_t adapter) {
  if (adapter < 0 || adapter >= n_adapters()) {
    return out_of_range("LoRA adapter " + std::to_string(adapter) + " is not one of the engine's " + std::to_string(n_adapters()));
  }
  const auto resident = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.adapter == adapter; });
  std::optional<std::int32_t> slot;
  if (resident != slots_.end()) {
    slot = static_cast<std::int32_t>(resident - slots_.begin());
  } else {
    slot = free_slot();
    if (!slot) return std::optional<std::int32_t>{};
    PEREGRINE_ASSIGN_OR_RETURN(std::vector<LoraSlotEntry> entries, loaders_[static_cast<std::size_t>(adapter)]());
    if (*slot == static_cast<std::int32_t>(slots_.size())) {
      PEREGRINE_ASSIGN_OR_RETURN(const std::int32_t added, set_.add_slot(std::move(entries)));
      (void)added;
      slots_.emplace_back();
    } else {
      PEREGRINE_RETURN_IF_ERROR(set_.replace_slot(*slot, std::move(entries)));
      ++evictions_;
    }
    ++loads_;
    slots_[static_cast<std::size_t>(*slot)].adapter = adapter;
  }
  Slot& s = slots_[static_cast<std::size_t>(*slot)];
  ++s.pins;
  s.last_used = ++clock_;
  return slot;
}

Status LoraPool::place(std::int32_t slot, std::int32_t adapter) {
  if (slot < 0 || slot >= max_resident_ || adapter < 0 || adapter >= n_adapters()) {
    return out_of_range("LoRA slot " + std::to_string(slot) + " / adapter " + std::to_string(adapter) + " is out of range");
  }
  if (slot < static_cast<std::int32_t>(slots_.size()) && slots_[static_cast<std::size_t>(slot)].adapter == adapter) {
    return Status::ok();
  }
  PEREGRINE_ASSIGN_OR_RETURN(std::vector<LoraSlotEntry> entries, loaders_[static_cast<std::size_t>(adapter)]());
  while (static_cast<std::int32_t>(slots_.size()) <= slot) {  // the slot itself converts `entries` once
    const bool last = static_cast<std::int32_t>(slots_.size()) == slot;
    PEREGRINE_ASSIGN_OR_RETURN(const std::int32_t added, set_.add_slot(last ? std::move(entries) : entries));
    (void)added;
    slots_.emplace_back();
    if (last) entries.clear();
  }
  if (!entries.empty()) PEREGRINE_RETURN_IF_ERROR(set_.replace_slot(slot, std::move(entries)));
  ++loads_;
  slots_[static_cast<std::size_t>(slot)].adapter = adapter;
  return Status::ok();
}

void LoraPool::release(std::int32_t slot) {
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  if (s.pins > 0) --s.pins;
}

}  // namespace peregrine

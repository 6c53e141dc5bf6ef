// The LoRA adapters a serving engine can run, at most `max_resident` of them in memory at once
// (vLLM's --max-loras; S-LoRA's adapter cache, Sheng et al. 2023): an adapter is loaded on
// demand into a slot of one LoraSet (model/lora_set.h) when a request naming it is admitted,
// pinned while requests use it, and evicted least recently used when a slot is needed and no
// request holds it. Not thread-safe: the engine's step loop owns it (loads block that loop).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/model/lora_set.h"

namespace peregrine {

/// Loads one servable adapter: the (adapter, scale) entries its slot applies together.
using LoraLoader = std::function<Expected<std::vector<LoraSlotEntry>>()>;

class LoraPool {
 public:
  /// `loaders[k]` loads adapter k (RequestOptions::lora_adapter = k). `max_resident` >= 1
  /// (clamped); nothing is loaded before the first acquire(). `products`: the LoraSet's
  /// product dtype (lora_product_dtype of the base).
  LoraPool(std::vector<LoraLoader> loaders, std::int32_t max_resident, DType products = DType::kF32);

  std::int32_t n_adapters() const { return static_cast<std::int32_t>(loaders_.size()); }
  std::int32_t max_resident() const { return max_resident_; }
  /// The slots the forward applies (Batch::lora_slots index them).
  const LoraSet& set() const { return set_; }

  /// A slot of set() holding `adapter`, pinned until a matching release(): the resident one
  /// (made most recently used), else a new slot while fewer than max_resident exist, else the
  /// least recently used slot no request pins, reloaded. std::nullopt (no error) when every
  /// slot is pinned by other adapters: retry after a release. Errors: kOutOfRange for an
  /// adapter outside [0, n_adapters()); the loader's error (nothing is evicted then).
  Expected<std::optional<std::int32_t>> acquire(std::int32_t adapter);
  /// Unpins one acquire() of `slot`.
  void release(std::int32_t slot);
  /// For a pool that follows another one (a serve --tp / --pp worker, engine/forward_mirror.h):
  /// makes slot `slot` hold `adapter` as the other pool's does, loading it unless it is there
  /// (slots up to `slot` are added first, empty), ignoring pins. Errors: kOutOfRange (slot
  /// outside [0, max_resident()), adapter outside [0, n_adapters())); the loader's error.
  Status place(std::int32_t slot, std::int32_t adapter);

  /// The adapter slot `slot` holds (-1: none), and counters for /metrics.
  std::int32_t adapter_in(std::int32_t slot) const { return slots_[static_cast<std::size_t>(slot)].adapter; }
  std::int64_t loads() const { return loads_; }
  std::int64_t evictions() const { return evictions_; }

 private:
  struct Slot {
    std::int32_t adapter = -1;
    std::int32_t pins = 0;
    std::uint64_t last_used = 0;
  };
  std::optional<std::int32_t> free_slot() const;

  std::vector<LoraLoader> loaders_;
  std::int32_t max_resident_;
  LoraSet set_;
  std::vector<Slot> slots_;
  std::uint64_t clock_ = 0;
  std::int64_t loads_ = 0, evictions_ = 0;
};

}  // namespace peregrine

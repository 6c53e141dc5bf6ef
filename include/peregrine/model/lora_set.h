// The LoRA adapters a LlamaModel::forward applies unmerged (Hu et al. 2022): for an adapted
// weight W, y = x·Wᵀ + Σ_adapters user_scale · s · (x·Aᵀ)·Bᵀ, on any base weight type (the
// LoRA products run in f32 beside the base product). Adapters sit in slots: a slot is a list of
// (adapter, user scale) applied together (generate's repeated --lora); each Batch row picks a
// slot (Batch::lora_slots, -1 = the base alone), so one batch mixes rows of several adapters and
// the base. The products of one weight go slot by slot over the rows of that slot, gathered:
// Punica's SGMV / S-LoRA's grouping of a batch's rows by adapter (Chen et al. 2023; Sheng et al.
// 2023), here as two small matmuls per (slot, adapter) instead of a fused kernel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/lora_adapter.h"

namespace peregrine {

struct LoraSlotEntry {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1.0f;  // the user's scale on top of the adapter's alpha / r
};

class LoraSet {
 public:
  /// Adds a slot applying `entries` together; returns its index (0, 1, ...). Errors:
  /// kInvalidArgument (no entry, a null adapter, a scale that is not finite).
  Expected<std::int32_t> add_slot(std::vector<LoraSlotEntry> entries);
  /// Replaces what slot `slot` applies with `entries` (the old adapters are released). Only
  /// between forwards. Errors: those of add_slot; kOutOfRange for a slot outside [0, n_slots()).
  Status replace_slot(std::int32_t slot, std::vector<LoraSlotEntry> entries);
  std::int32_t n_slots() const { return static_cast<std::int32_t>(slots_.size()); }

  /// For each slot k with products for the canonical weight `name`: y[i] += Σ scale · (x[i]·Aᵀ)·Bᵀ
  /// over the rows i with row_slots[i] == k. x [n, in], y [n, out] f32; row_slots [n] (-1 or a
  /// slot index). Preconditions: the adapters' shapes are the weight's (load_lora_adapter
  /// checked them against the base).
  void apply(const std::string& name, std::span<const float> x, std::int64_t n, std::span<float> y,
             std::span<const std::int32_t> row_slots, ThreadPool& pool) const;

 private:
  struct Product {
    TensorView a, b;  // f32 views of the adapter's A [r, in], B [out, r]
    float scale;      // user scale · alpha / r
  };
  struct Slot {
    std::map<std::string, std::vector<Product>> products;        // weight name → products
    std::vector<std::shared_ptr<const LoraAdapter>> adapters;  // what the views point into
  };
  static Expected<Slot> make_slot(std::vector<LoraSlotEntry> entries);
  std::vector<Slot> slots_;
};

}  // namespace peregrine

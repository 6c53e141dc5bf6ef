// The LoRA adapters a LlamaModel::forward applies unmerged (Hu et al. 2022): for an adapted
// weight W, y = x·Wᵀ + Σ_adapters user_scale · s · (x·Aᵀ)·Bᵀ, on any base weight type (the
// LoRA products run beside the base product, over copies of A and Bᵀ in 2 MiB pages, in f32 or,
// for a 16-bit or quantized base, F16 / BF16: half the bytes a decode step reads). Adapters sit in slots: a slot is a
// list of (adapter, user scale) applied together (generate's repeated --lora); each Batch row
// picks a slot (Batch::lora_slots, -1 = the base alone), so one batch mixes rows of several
// adapters and the base. The products of the weights that share an input (Q/K/V, gate/up, or
// one weight alone) group the batch's rows by slot (Punica's SGMV / S-LoRA's grouping, Chen et
// al. 2023; Sheng et al. 2023): one parallel region computes x·Aᵀ [rows of the slot, r] for
// every (slot, weight, adapter), split over all their A rows, a second adds scale · (x·Aᵀ)·Bᵀ,
// split over all the weights' output columns — two thread-pool starts per call whatever the
// number of slots, through gemv_float (kernels/cpu/matmul/gemv_float.h: Punica's "shrink") and
// lora_expand (kernels/cpu/matmul/lora_expand.h: "expand", over B stored transposed in column
// panels: a thread's share of one adapter's Bᵀ is one sequential stream).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/huge_page_buffer.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/lora_adapter.h"

namespace peregrine {

struct LoraSlotEntry {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1.0f;  // the user's scale on top of the adapter's alpha / r
};

/// One adapted weight of a LoraSet::apply call: its canonical name (layer_tensor_name) and the
/// output [n, out] f32 its LoRA products add to.
struct LoraTarget {
  std::string name;
  std::span<float> y;
};

class LoraSet {
 public:
  /// `products`: the dtype A and B are multiplied in — kF32 (the adapters' own values, exact),
  /// kF16 or kBF16 (copies rounded to nearest even at add_slot; any other dtype means kF32).
  /// lora_product_dtype picks it from the base.
  explicit LoraSet(DType products = DType::kF32);
  DType product_dtype() const { return dtype_; }

  /// Adds a slot applying `entries` together; returns its index (0, 1, ...). Errors:
  /// kInvalidArgument (no entry, a null adapter, a scale that is not finite).
  Expected<std::int32_t> add_slot(std::vector<LoraSlotEntry> entries);
  /// Replaces what slot `slot` applies with `entries` (the old adapters are released). Only
  /// between forwards. Errors: those of add_slot; kOutOfRange for a slot outside [0, n_slots()).
  Status replace_slot(std::int32_t slot, std::vector<LoraSlotEntry> entries);
  std::int32_t n_slots() const { return static_cast<std::int32_t>(slots_.size()); }

  /// For each target and each slot k with products for the target's weight: target.y[i] +=
  /// Σ scale · (x[i]·Aᵀ)·Bᵀ over the rows i with row_slots[i] == k. The targets share the input
  /// x [n, in] f32 (Q/K/V, gate/up): one call runs all their products in the two parallel
  /// regions. Each target.y is [n, out] f32 (out: that weight's); row_slots [n] (-1 or a slot
  /// index). Products accumulate in f32 (gemv_float, lora_expand); work below kMinParallelMacs
  /// (kernels/cpu/matmul/matmul.h) multiply-adds runs on the calling thread. Not re-entrant per
  /// thread (per-thread buffers, reused between calls). Preconditions: n >= 0, distinct
  /// targets, the adapters' shapes are the weights' (load_lora_adapter checked them against
  /// the base).
  void apply(std::span<const LoraTarget> targets, std::span<const float> x, std::int64_t n,
             std::span<const std::int32_t> row_slots, ThreadPool& pool) const;

  /// Scalar single-threaded reference twin of apply for one target `name` with output y:
  /// row by row and adapter by adapter, x·Aᵀ through matmul_reference (f64 sums of the stored A values), then ·Bᵀ through
  /// lora_expand_reference.
  void apply_reference(const std::string& name, std::span<const float> x, std::int64_t n, std::span<float> y,
                       std::span<const std::int32_t> row_slots) const;

 private:
  struct Product {
    TensorView a, bt;  // A [r, in] row-major and Bᵀ [r, out] in lora_expand's panels, in dtype_, in the slot's storage
    float scale;       // user scale · alpha / r
  };
  DType dtype_;
  struct Slot {
    std::map<std::string, std::vector<Product>> products;  // weight name → products
    HugePageBuffer storage;  // every product's A and Bᵀ, in 2 MiB pages (decode streams them)
  };
  Expected<Slot> make_slot(std::vector<LoraSlotEntry> entries) const;
  std::vector<Slot> slots_;
};

/// The product dtype for adapters on `base` (LoraSet's constructor): kF32 when its attn_q
/// weight of layer 0 is F32, kBF16 when BF16, kF16 otherwise (F16 and quantized bases: as
/// serving engines run adapters in the activation dtype).
DType lora_product_dtype(const ModelFile& base);

}  // namespace peregrine

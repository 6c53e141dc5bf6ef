#include "peregrine/model/lora_set.h"

#include <cmath>

#include "peregrine/kernels/cpu/matmul.h"

namespace peregrine {

Expected<LoraSet::Slot> LoraSet::make_slot(std::vector<LoraSlotEntry> entries) {
  if (entries.empty()) return invalid_argument("a LoRA slot needs at least one adapter");
  Slot slot;
  for (const LoraSlotEntry& e : entries) {
    if (e.adapter == nullptr) return invalid_argument("a LoRA slot entry has no adapter");
    if (!std::isfinite(e.scale)) return invalid_argument("a LoRA scale must be finite");
    for (const auto& [name, pair] : e.adapter->tensors) {
      slot.products[name].push_back({f32_matrix_view(name + ".lora_a", pair.a, pair.rank, pair.in),
                                     f32_matrix_view(name + ".lora_b", pair.b, pair.out, pair.rank), e.scale * e.adapter->scale()});
    }
    slot.adapters.push_back(e.adapter);
  }
  return slot;
}

Expected<std::int32_t> LoraSet::add_slot(std::vector<LoraSlotEntry> entries) {
  PEREGRINE_ASSIGN_OR_RETURN(Slot slot, make_slot(std::move(entries)));
  slots_.push_back(std::move(slot));
  return n_slots() - 1;
}

Status LoraSet::replace_slot(std::int32_t slot, std::vector<LoraSlotEntry> entries) {
  if (slot < 0 || slot >= n_slots()) return out_of_range("LoRA slot " + std::to_string(slot) + " does not exist");
  PEREGRINE_ASSIGN_OR_RETURN(Slot made, make_slot(std::move(entries)));
  slots_[static_cast<std::size_t>(slot)] = std::move(made);
  return Status::ok();
}

void LoraSet::apply(const std::string& name, std::span<const float> x, std::int64_t n, std::span<float> y,
                    std::span<const std::int32_t> row_slots, ThreadPool& pool) const {
  const std::int64_t in = static_cast<std::int64_t>(x.size()) / n, out = static_cast<std::int64_t>(y.size()) / n;
  std::vector<std::int64_t> rows;
  std::vector<float> xs, t, u;
  for (std::int32_t k = 0; k < n_slots(); ++k) {
    const auto& products = slots_[static_cast<std::size_t>(k)].products;
    const auto it = products.find(name);
    if (it == products.end()) continue;
    rows.clear();
    for (std::int64_t i = 0; i < n; ++i) {
      if (row_slots[static_cast<std::size_t>(i)] == k) rows.push_back(i);
    }
    if (rows.empty()) continue;
    const auto m = static_cast<std::int64_t>(rows.size());
    xs.resize(static_cast<std::size_t>(m * in));  // the slot's rows of x, gathered
    for (std::int64_t j = 0; j < m; ++j) std::copy_n(x.begin() + rows[j] * in, in, xs.begin() + j * in);
    for (const Product& p : it->second) {
      t.resize(static_cast<std::size_t>(m * p.a.shape[0]));
      u.resize(static_cast<std::size_t>(m * out));
      matmul(p.a, xs, m, t, pool);  // x·Aᵀ [m, r]
      matmul(p.b, t, m, u, pool);   // (x·Aᵀ)·Bᵀ [m, out]
      for (std::int64_t j = 0; j < m; ++j) {
        float* dst = &y[static_cast<std::size_t>(rows[j] * out)];
        const float* src = &u[static_cast<std::size_t>(j * out)];
        for (std::int64_t c = 0; c < out; ++c) dst[c] += p.scale * src[c];
      }
    }
  }
}

}  // namespace peregrine

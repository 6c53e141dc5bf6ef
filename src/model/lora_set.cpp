#include "peregrine/model/lora_set.h"

#include <algorithm>
#include <cmath>

#include "peregrine/kernels/cpu/gemv_float.h"
#include "peregrine/kernels/cpu/matmul.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

/// The [rows, cols] matrix `values` as a view in `dtype` (F32: a view of the values, which the
/// adapter keeps alive; F16 / BF16: a rounded copy, kept in `storage`).
TensorView product_view(const std::string& name, const std::vector<float>& values, std::int64_t rows, std::int64_t cols,
                        DType dtype, std::shared_ptr<std::vector<std::uint16_t>>& storage) {
  TensorView v = f32_matrix_view(name, values, rows, cols);
  if (dtype != DType::kF16 && dtype != DType::kBF16) return v;
  storage = std::make_shared<std::vector<std::uint16_t>>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) (*storage)[i] = dtype == DType::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
  v.dtype = dtype;
  v.data = storage->data();
  v.nbytes = storage->size() * sizeof(std::uint16_t);
  return v;
}

/// One (slot, product) of an apply call: the slot's rows, its input and its x·Aᵀ.
struct Job {
  const TensorView* a;    // A [rank, in]
  const TensorView* b;    // B [out, rank]
  float scale;
  std::int64_t group;     // index into the call's row groups
  std::int64_t t_offset;  // of its t [m, rank] in the call's t buffer
  std::int64_t a_begin;   // its first A row in phase 1's numbering of all jobs' A rows
};

/// A slot's rows in one apply call: their indices and input (x's own rows when contiguous,
/// else gathered).
struct Group {
  std::int64_t first, m;  // offset into the call's row list, count
  const float* x;         // [m, in]
  bool contiguous;        // rows first_row .. first_row + m - 1 of x / y
};

// Phase 2's per-thread [≤ kRowBlock, out] buffer, reused between calls.
thread_local std::vector<float> tl_u;

}  // namespace

LoraSet::LoraSet(DType products)
    : dtype_(products == DType::kF16 || products == DType::kBF16 ? products : DType::kF32) {}

Expected<LoraSet::Slot> LoraSet::make_slot(std::vector<LoraSlotEntry> entries) const {
  if (entries.empty()) return invalid_argument("a LoRA slot needs at least one adapter");
  Slot slot;
  for (const LoraSlotEntry& e : entries) {
    if (e.adapter == nullptr) return invalid_argument("a LoRA slot entry has no adapter");
    if (!std::isfinite(e.scale)) return invalid_argument("a LoRA scale must be finite");
    for (const auto& [name, pair] : e.adapter->tensors) {
      Product p;
      p.a = product_view(name + ".lora_a", pair.a, pair.rank, pair.in, dtype_, p.a_storage);
      p.b = product_view(name + ".lora_b", pair.b, pair.out, pair.rank, dtype_, p.b_storage);
      p.scale = e.scale * e.adapter->scale();
      slot.products[name].push_back(std::move(p));
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
  // Rows grouped by slot (a counting sort: slots are few), each slot's group gathered unless its
  // rows are contiguous (a sequence's rows are; decode has one row per sequence).
  // The calling thread's buffers, named through references: the phases run on the pool's
  // workers too, where the thread_local names would be their own (empty) ones.
  thread_local std::vector<std::int64_t> tl_rows, tl_count;
  thread_local std::vector<float> tl_xs, tl_t;
  thread_local std::vector<Group> tl_groups;
  thread_local std::vector<Job> tl_jobs;
  std::vector<std::int64_t>& rows = tl_rows;
  std::vector<std::int64_t>& count = tl_count;
  std::vector<float>& xs = tl_xs;
  std::vector<float>& t = tl_t;
  std::vector<Group>& groups = tl_groups;
  std::vector<Job>& jobs = tl_jobs;
  const auto n_slot = static_cast<std::size_t>(n_slots());
  count.assign(n_slot + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t k = row_slots[static_cast<std::size_t>(i)];
    if (k >= 0 && slots_[static_cast<std::size_t>(k)].products.contains(name)) ++count[static_cast<std::size_t>(k) + 1];
  }
  for (std::size_t k = 0; k < n_slot; ++k) count[k + 1] += count[k];
  rows.resize(static_cast<std::size_t>(count[n_slot]));
  if (rows.empty()) return;
  {
    std::vector<std::int64_t>& next = count;  // reused as write cursors, restored below
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t k = row_slots[static_cast<std::size_t>(i)];
      if (k >= 0 && slots_[static_cast<std::size_t>(k)].products.contains(name)) rows[static_cast<std::size_t>(next[static_cast<std::size_t>(k)]++)] = i;
    }
    for (std::size_t k = n_slot; k > 0; --k) next[k] = next[k - 1];  // cursors ended at the next slot's start
    next[0] = 0;
  }
  groups.clear();
  jobs.clear();
  std::int64_t gathered = 0, t_size = 0, a_rows = 0, macs = 0;
  for (std::size_t k = 0; k < n_slot; ++k) {
    const std::int64_t first = count[k], m = count[k + 1] - first;
    if (m == 0) continue;
    const bool contiguous = rows[static_cast<std::size_t>(first + m - 1)] - rows[static_cast<std::size_t>(first)] == m - 1;
    if (!contiguous) gathered += m;
    groups.push_back({first, m, nullptr, contiguous});
    for (const Product& p : slots_[k].products.at(name)) {
      const std::int64_t rank = p.a.shape[0];
      jobs.push_back({&p.a, &p.b, p.scale, static_cast<std::int64_t>(groups.size()) - 1, t_size, a_rows});
      t_size += m * rank;
      a_rows += rank;
      macs += m * rank * (in + out);
    }
  }
  xs.resize(static_cast<std::size_t>(gathered * in));
  t.resize(static_cast<std::size_t>(t_size));
  std::int64_t xs_at = 0;
  for (Group& g : groups) {
    const std::int64_t* r = &rows[static_cast<std::size_t>(g.first)];
    if (g.contiguous) {
      g.x = x.data() + r[0] * in;
      continue;
    }
    for (std::int64_t j = 0; j < g.m; ++j) std::copy_n(x.begin() + r[j] * in, in, xs.begin() + (xs_at + j) * in);
    g.x = xs.data() + xs_at * in;
    xs_at += g.m;
  }

  // Phase 1, t = x·Aᵀ [m, rank] for every job, over all jobs' A rows at once.
  auto phase1 = [&](std::int64_t begin, std::int64_t end) {
    for (const Job& job : jobs) {
      const std::int64_t rank = job.a->shape[0];
      const std::int64_t r0 = std::max(begin - job.a_begin, std::int64_t{0}), r1 = std::min(end - job.a_begin, rank);
      if (r0 >= r1) continue;
      const Group& g = groups[static_cast<std::size_t>(job.group)];
      gemv_float(*job.a, {g.x, static_cast<std::size_t>(g.m * in)}, g.m,
                 std::span(t).subspan(static_cast<std::size_t>(job.t_offset), static_cast<std::size_t>(g.m * rank)), r0, r1);
    }
  };
  // Phase 2, y[rows] += scale · t·Bᵀ over output columns [begin, end) of every job, through a
  // per-thread [≤ kRowBlock, out] buffer (a slot's jobs add into the same rows, so the columns,
  // not the jobs, are split between threads).
  constexpr std::int64_t kRowBlock = 64;
  auto phase2 = [&](std::int64_t begin, std::int64_t end) {
    for (const Job& job : jobs) {
      const std::int64_t rank = job.a->shape[0];
      const Group& g = groups[static_cast<std::size_t>(job.group)];
      for (std::int64_t j0 = 0; j0 < g.m; j0 += kRowBlock) {
        const std::int64_t mb = std::min(kRowBlock, g.m - j0);
        tl_u.resize(static_cast<std::size_t>(mb * out));
        gemv_float(*job.b, std::span<const float>(t).subspan(static_cast<std::size_t>(job.t_offset + j0 * rank), static_cast<std::size_t>(mb * rank)),
                   mb, tl_u, begin, end);
        for (std::int64_t j = 0; j < mb; ++j) {
          float* dst = &y[static_cast<std::size_t>(rows[static_cast<std::size_t>(g.first + j0 + j)] * out)];
          const float* src = &tl_u[static_cast<std::size_t>(j * out)];
          for (std::int64_t c = begin; c < end; ++c) dst[c] += job.scale * src[c];
        }
      }
    }
  };
  if (macs < kMinParallelMacs || pool.n_threads() == 1) {
    phase1(0, a_rows);
    phase2(0, out);
  } else {
    pool.parallel_for(a_rows, phase1);
    pool.parallel_for(out, phase2);
  }
}

void LoraSet::apply_reference(const std::string& name, std::span<const float> x, std::int64_t n, std::span<float> y,
                              std::span<const std::int32_t> row_slots) const {
  const std::int64_t in = static_cast<std::int64_t>(x.size()) / n, out = static_cast<std::int64_t>(y.size()) / n;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t k = row_slots[static_cast<std::size_t>(i)];
    if (k < 0) continue;
    const auto& products = slots_[static_cast<std::size_t>(k)].products;
    const auto it = products.find(name);
    if (it == products.end()) continue;
    for (const Product& p : it->second) {
      const std::int64_t rank = p.a.shape[0];
      std::vector<float> t(static_cast<std::size_t>(rank)), u(static_cast<std::size_t>(out));
      matmul_reference(p.a, x.subspan(static_cast<std::size_t>(i * in), static_cast<std::size_t>(in)), 1, t);
      matmul_reference(p.b, t, 1, u);
      for (std::int64_t c = 0; c < out; ++c) y[static_cast<std::size_t>(i * out + c)] += p.scale * u[static_cast<std::size_t>(c)];
    }
  }
}

DType lora_product_dtype(const ModelFile& base) {
  const TensorView* q = base.find(layer_tensor_name(0, "attn_q"));
  if (q == nullptr || q->dtype == DType::kF32) return DType::kF32;
  return q->dtype == DType::kBF16 ? DType::kBF16 : DType::kF16;
}

}  // namespace peregrine

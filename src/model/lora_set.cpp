#include "peregrine/model/lora_set.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <vector>

#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/kernels/cpu/matmul/lora_expand.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

/// Bytes of `elements` product values in `dtype`, rounded up to a cache line.
std::size_t product_bytes(std::int64_t elements, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(elements) * (dtype == DType::kF32 ? 4 : 2);
  return (bytes + 63) / 64 * 64;
}

/// The layout a product matrix is stored in: its number of stored values and where (r, c) sits.
struct Layout {
  std::int64_t elements;
  std::function<std::int64_t(std::int64_t, std::int64_t)> index;
};

Layout row_major(std::int64_t rows, std::int64_t cols) {
  return {rows * cols, [cols](std::int64_t r, std::int64_t c) { return r * cols + c; }};
}

Layout expand_panels(std::int64_t rank, std::int64_t out) {  // lora_expand's Bᵀ layout
  return {lora_panel_elements(rank, out), [rank](std::int64_t k, std::int64_t c) { return lora_panel_index(rank, k, c); }};
}

/// Writes the [rows, cols] matrix value(r, c) at `at` in `dtype` (F32, or F16 / BF16 rounded to
/// nearest even), laid out as `layout` says (values it leaves out are zero), and returns its
/// view; advances `at` by product_bytes.
template <class Value>
TensorView write_product(const std::string& name, std::int64_t rows, std::int64_t cols, const Layout& layout, DType dtype,
                         std::uint8_t*& at, const Value& value) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = {rows, cols};
  v.data = at;
  v.nbytes = static_cast<std::size_t>(layout.elements) * (dtype == DType::kF32 ? 4 : 2);
  std::fill_n(at, v.nbytes, std::uint8_t{0});  // +0.0 in every dtype
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float f = value(r, c);
      const auto i = static_cast<std::size_t>(layout.index(r, c));
      if (dtype == DType::kF32) reinterpret_cast<float*>(at)[i] = f;
      else reinterpret_cast<std::uint16_t*>(at)[i] = dtype == DType::kF16 ? f32_to_f16(f) : f32_to_bf16(f);
    }
  }
  at += product_bytes(layout.elements, dtype);
  return v;
}

/// One (slot, product) of an apply call: the slot's rows, its input, the target it adds to
/// and its x·Aᵀ.
struct Job {
  const TensorView* a;    // A [rank, in]
  const TensorView* bt;   // Bᵀ [rank, out]
  float scale;
  std::int64_t group;     // index into the call's row groups
  std::int64_t target;    // index into the call's targets
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

/// The rows i < n whose slot row_slots[i] is adapted, grouped by slot (a counting sort: slots
/// are few): slot k's rows are rows[count[k] .. count[k + 1]), in order.
void group_rows_by_slot(std::span<const std::int32_t> row_slots, std::int64_t n, const std::vector<bool>& adapted,
                        std::vector<std::int64_t>& rows, std::vector<std::int64_t>& count) {
  const std::size_t n_slot = adapted.size();
  count.assign(n_slot + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t k = row_slots[static_cast<std::size_t>(i)];
    if (k >= 0 && adapted[static_cast<std::size_t>(k)]) ++count[static_cast<std::size_t>(k) + 1];
  }
  for (std::size_t k = 0; k < n_slot; ++k) count[k + 1] += count[k];
  rows.resize(static_cast<std::size_t>(count[n_slot]));
  std::vector<std::int64_t>& next = count;  // reused as write cursors, restored below
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t k = row_slots[static_cast<std::size_t>(i)];
    if (k >= 0 && adapted[static_cast<std::size_t>(k)]) rows[static_cast<std::size_t>(next[static_cast<std::size_t>(k)]++)] = i;
  }
  for (std::size_t k = n_slot; k > 0; --k) next[k] = next[k - 1];  // cursors ended at the next slot's start
  next[0] = 0;
}

/// Points each group at its input rows of x [n, in]: x's own rows when contiguous (a sequence's
/// rows are; decode has one row per sequence), else copies gathered into xs.
void gather_inputs(std::span<const float> x, std::int64_t in, const std::vector<std::int64_t>& rows,
                   std::vector<Group>& groups, std::vector<float>& xs) {
  std::int64_t gathered = 0;
  for (const Group& g : groups) gathered += g.contiguous ? 0 : g.m;
  xs.resize(static_cast<std::size_t>(gathered * in));
  std::int64_t at = 0;
  for (Group& g : groups) {
    const std::int64_t* r = &rows[static_cast<std::size_t>(g.first)];
    if (g.contiguous) {
      g.x = x.data() + r[0] * in;
      continue;
    }
    for (std::int64_t j = 0; j < g.m; ++j) std::copy_n(x.begin() + r[j] * in, in, xs.begin() + (at + j) * in);
    g.x = xs.data() + at * in;
    at += g.m;
  }
}

/// The targets' output columns one after another in blocks of kLoraExpandCols: target j has
/// blocks [result[j], result[j + 1]).
std::vector<std::int64_t> output_blocks(std::span<const LoraTarget> targets, std::int64_t n) {
  std::vector<std::int64_t> begin(targets.size() + 1, 0);
  for (std::size_t j = 0; j < targets.size(); ++j) {
    const std::int64_t out = static_cast<std::int64_t>(targets[j].y.size()) / n;
    begin[j + 1] = begin[j] + (out + kLoraExpandCols - 1) / kLoraExpandCols;
  }
  return begin;
}

/// Phase 1 (Punica's shrink): t = x·Aᵀ [m, rank] of every job, for A rows [begin, end) in the
/// numbering of all jobs' A rows.
void shrink(const std::vector<Job>& jobs, const std::vector<Group>& groups, std::int64_t in, std::vector<float>& t,
            std::int64_t begin, std::int64_t end) {
  for (const Job& job : jobs) {
    const std::int64_t rank = job.a->shape[0];
    const std::int64_t r0 = std::max(begin - job.a_begin, std::int64_t{0}), r1 = std::min(end - job.a_begin, rank);
    if (r0 >= r1) continue;
    const Group& g = groups[static_cast<std::size_t>(job.group)];
    gemv_float(*job.a, {g.x, static_cast<std::size_t>(g.m * in)}, g.m,
               std::span(t).subspan(static_cast<std::size_t>(job.t_offset), static_cast<std::size_t>(g.m * rank)), r0, r1);
  }
}

/// Phase 2 (Punica's expand): y[rows] += scale · t·Bᵀ of every job over output blocks
/// [begin, end) of output_blocks' numbering (a slot's jobs add into the same rows, so the
/// columns, not the jobs, are split between threads).
void expand(const std::vector<Job>& jobs, const std::vector<Group>& groups, const std::vector<std::int64_t>& rows,
            const std::vector<float>& t, std::span<const LoraTarget> targets, const std::vector<std::int64_t>& blocks,
            std::int64_t n, std::int64_t begin, std::int64_t end) {
  for (const Job& job : jobs) {
    const auto j = static_cast<std::size_t>(job.target);
    const std::int64_t b0 = std::max(begin, blocks[j]), b1 = std::min(end, blocks[j + 1]);
    if (b0 >= b1) continue;
    const std::span<float> y = targets[j].y;
    const std::int64_t out = static_cast<std::int64_t>(y.size()) / n;
    const Group& g = groups[static_cast<std::size_t>(job.group)];
    lora_expand(*job.bt, std::span<const float>(t).subspan(static_cast<std::size_t>(job.t_offset)), g.m, job.scale, y,
                std::span<const std::int64_t>(rows).subspan(static_cast<std::size_t>(g.first)),
                (b0 - blocks[j]) * kLoraExpandCols, std::min((b1 - blocks[j]) * kLoraExpandCols, out));
  }
}

}  // namespace

LoraSet::LoraSet(DType products)
    : dtype_(products == DType::kF16 || products == DType::kBF16 ? products : DType::kF32) {}

Expected<LoraSet::Slot> LoraSet::make_slot(std::vector<LoraSlotEntry> entries) const {
  if (entries.empty()) return invalid_argument("a LoRA slot needs at least one adapter");
  std::size_t bytes = 0;
  for (const LoraSlotEntry& e : entries) {
    if (e.adapter == nullptr) return invalid_argument("a LoRA slot entry has no adapter");
    if (!std::isfinite(e.scale)) return invalid_argument("a LoRA scale must be finite");
    for (const auto& [name, pair] : e.adapter->tensors) {
      bytes += product_bytes(pair.rank * pair.in, dtype_) + product_bytes(lora_panel_elements(pair.rank, pair.out), dtype_);
    }
  }
  Slot slot;
  PEREGRINE_ASSIGN_OR_RETURN(slot.storage, HugePageBuffer::allocate(bytes));
  std::uint8_t* at = slot.storage.data();
  for (const LoraSlotEntry& e : entries) {
    for (const auto& [name, pair] : e.adapter->tensors) {
      Product p;
      const LoraPair& lp = pair;
      p.a = write_product(name + ".lora_a", lp.rank, lp.in, row_major(lp.rank, lp.in), dtype_, at,
                          [&](std::int64_t k, std::int64_t i) { return lp.a[static_cast<std::size_t>(k * lp.in + i)]; });
      p.bt = write_product(name + ".lora_b_t", lp.rank, lp.out, expand_panels(lp.rank, lp.out), dtype_, at,
                           [&](std::int64_t k, std::int64_t o) { return lp.b[static_cast<std::size_t>(o * lp.rank + k)]; });
      p.scale = e.scale * e.adapter->scale();
      slot.products[name].push_back(std::move(p));
    }
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

void LoraSet::apply(std::span<const LoraTarget> targets, std::span<const float> x, std::int64_t n,
                    std::span<const std::int32_t> row_slots, ThreadPool& pool) const {
  if (targets.empty() || n <= 0) return;
  const std::int64_t in = static_cast<std::int64_t>(x.size()) / n;
  // The calling thread's buffers, named through references: the phases run on the pool's
  // workers too, where the thread_local names would be their own (empty) ones.
  thread_local std::vector<std::int64_t> tl_rows, tl_count;
  thread_local std::vector<float> tl_xs, tl_t;
  thread_local std::vector<Group> tl_groups;
  thread_local std::vector<Job> tl_jobs;
  std::vector<std::int64_t>& rows = tl_rows;
  std::vector<std::int64_t>& count = tl_count;
  std::vector<float>& t = tl_t;
  std::vector<Group>& groups = tl_groups;
  std::vector<Job>& jobs = tl_jobs;
  // found[k · targets + j]: slot k's products for target j, or null.
  const std::size_t n_slot = slots_.size(), n_target = targets.size();
  std::vector<const std::vector<Product>*> found(n_slot * n_target, nullptr);
  std::vector<bool> adapted(n_slot, false);
  for (std::size_t k = 0; k < n_slot; ++k) {
    for (std::size_t j = 0; j < n_target; ++j) {
      const auto it = slots_[k].products.find(targets[j].name);
      if (it == slots_[k].products.end()) continue;
      found[k * n_target + j] = &it->second;
      adapted[k] = true;
    }
  }
  group_rows_by_slot(row_slots, n, adapted, rows, count);
  if (rows.empty()) return;
  // Jobs slot by slot, each slot's in target order.
  groups.clear();
  jobs.clear();
  std::int64_t t_size = 0, a_rows = 0, macs = 0;
  for (std::size_t k = 0; k < n_slot; ++k) {
    const std::int64_t first = count[k], m = count[k + 1] - first;
    if (m == 0) continue;
    const bool contiguous = rows[static_cast<std::size_t>(first + m - 1)] - rows[static_cast<std::size_t>(first)] == m - 1;
    groups.push_back({first, m, nullptr, contiguous});
    for (std::size_t j = 0; j < n_target; ++j) {
      if (found[k * n_target + j] == nullptr) continue;
      for (const Product& p : *found[k * n_target + j]) {
        const std::int64_t rank = p.a.shape[0];
        jobs.push_back({&p.a, &p.bt, p.scale, static_cast<std::int64_t>(groups.size()) - 1, static_cast<std::int64_t>(j), t_size, a_rows});
        t_size += m * rank;
        a_rows += rank;
        macs += m * rank * (in + p.bt.shape[1]);
      }
    }
  }
  gather_inputs(x, in, rows, groups, tl_xs);
  t.resize(static_cast<std::size_t>(t_size));
  const std::vector<std::int64_t> blocks = output_blocks(targets, n);
  auto phase1 = [&](std::int64_t begin, std::int64_t end) { shrink(jobs, groups, in, t, begin, end); };
  auto phase2 = [&](std::int64_t begin, std::int64_t end) { expand(jobs, groups, rows, t, targets, blocks, n, begin, end); };
  if (macs < kMinParallelMacs || pool.n_threads() == 1) {
    phase1(0, a_rows);
    phase2(0, blocks.back());
  } else {
    pool.parallel_for(a_rows, phase1);
    pool.parallel_for(blocks.back(), phase2);
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
      std::vector<float> t(static_cast<std::size_t>(rank));
      float_matmul_reference(p.a, x.subspan(static_cast<std::size_t>(i * in), static_cast<std::size_t>(in)), 1, t, 0, rank);
      const std::int64_t row[] = {i};
      lora_expand_reference(p.bt, t, 1, p.scale, y, row, 0, out);
    }
  }
}

DType lora_product_dtype(const ModelFile& base) {
  const TensorView* q = base.find(layer_tensor_name(0, "attn_q"));
  if (q == nullptr || q->dtype == DType::kF32) return DType::kF32;
  return q->dtype == DType::kBF16 ? DType::kBF16 : DType::kF16;
}

}  // namespace peregrine

#include "peregrine/model/batch_kv_plan.h"

#include <map>
#include <string>
#include <utility>

namespace peregrine {
namespace {

// Per sequence: its KV slots [first, end): from its first row's position, one per row.
std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> slot_spans(const Batch& batch) {
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> spans;
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    auto [it, first] = spans.emplace(batch.seq_ids[i], std::pair<std::int64_t, std::int64_t>{batch.positions[i], batch.positions[i]});
    ++it->second.second;
  }
  return spans;
}

}  // namespace

Status reserve_batch_kv(const Batch& batch, KvCache& cache) {
  const auto spans = slot_spans(batch);
  std::int64_t needed = 0;
  const std::int32_t bs = cache.block_size();
  for (const auto& [seq, span] : spans) {
    const auto [first, end] = span;
    if (first > cache.length(seq)) {
      return invalid_argument("forward: sequence " + std::to_string(seq) + " starts at position " + std::to_string(first) +
                              ", past its " + std::to_string(cache.length(seq)) + " cached positions");
    }
    needed += first < cache.length(seq) ? cache.n_groups() * (blocks_for_tokens(end, bs) - first / bs) : cache.blocks_needed(seq, end);
  }
  if (needed > cache.pool().n_free()) {
    return resource_exhausted("forward: the batch needs " + std::to_string(needed) + " KV blocks, " +
                              std::to_string(cache.pool().n_free()) + " are free");
  }
  for (const auto& [seq, span] : spans) {
    if (span.first < cache.length(seq)) cache.truncate(seq, span.first);
    PEREGRINE_RETURN_IF_ERROR(cache.reserve(seq, span.second));
    cache.set_length(seq, span.second);
  }
  return Status::ok();
}

Status plan_batch_kv(Batch& batch, KvCache& cache) {
  PEREGRINE_RETURN_IF_ERROR(reserve_batch_kv(batch, cache));
  batch.kv_planned = true;
  return Status::ok();
}

bool batch_kv_covered(const Batch& batch, const KvCache& cache) {
  for (const auto& [seq, span] : slot_spans(batch)) {
    if (span.second > cache.length(seq)) return false;
    for (std::int32_t g = 0; g < cache.n_groups(); ++g) {
      if (static_cast<std::int64_t>(cache.block_table(seq, g).size()) < blocks_for_tokens(span.second, cache.block_size())) return false;
    }
  }
  return true;
}

}  // namespace peregrine

#include "peregrine/model/micro_batches.h"

#include <algorithm>
#include <map>

namespace peregrine {
namespace {

// Row indices where a micro-batch may start: every sequence of the rows before it ends there.
std::vector<std::int64_t> cut_points(const Batch& batch) {
  std::map<std::int32_t, std::int64_t> last_row;
  for (std::int64_t i = 0; i < batch.size(); ++i) last_row[batch.seq_ids[static_cast<std::size_t>(i)]] = i;
  std::vector<std::int64_t> cuts;
  std::int64_t reach = 0;  // the last row of every sequence met so far
  for (std::int64_t i = 0; i + 1 < batch.size(); ++i) {
    reach = std::max(reach, last_row[batch.seq_ids[static_cast<std::size_t>(i)]]);
    if (reach == i) cuts.push_back(i + 1);
  }
  return cuts;
}

Batch rows(const Batch& batch, std::int64_t begin, std::int64_t end) {
  Batch part;
  for (std::int64_t i = begin; i < end; ++i) {
    const auto r = static_cast<std::size_t>(i);
    part.add(batch.tokens[r], batch.positions[r], batch.seq_ids[r], batch.need_logits[r] != 0);
    if (!batch.lora_slots.empty()) part.lora_slots.push_back(batch.lora_slots[r]);
  }
  return part;
}

}  // namespace

std::vector<Batch> split_micro_batches(const Batch& batch, std::int64_t n) {
  if (n <= 1 || !batch.parents.empty() || batch.size() < 2) return {batch};
  const std::vector<std::int64_t> cuts = cut_points(batch);
  std::vector<Batch> parts;
  std::int64_t begin = 0;
  for (std::int64_t k = 1; k < n; ++k) {  // the first cut at or past k/n of the rows
    const auto cut = std::lower_bound(cuts.begin(), cuts.end(), std::max(batch.size() * k / n, begin + 1));
    if (cut == cuts.end()) break;
    parts.push_back(rows(batch, begin, *cut));
    begin = *cut;
  }
  parts.push_back(rows(batch, begin, batch.size()));
  return parts;
}

}  // namespace peregrine

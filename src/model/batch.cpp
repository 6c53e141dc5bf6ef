#include "peregrine/model/batch.h"

namespace peregrine {

std::int64_t Batch::n_logits() const {
  std::int64_t n = 0;
  for (auto f : need_logits) n += f != 0;
  return n;
}

void Batch::add(std::int32_t token, std::int32_t position, std::int32_t seq_id, bool logits,
                std::int32_t parent) {
  kv_planned = false;  // a new row needs a new plan
  if (parent >= 0 && parents.empty()) parents.assign(tokens.size(), -1);
  if (!parents.empty()) parents.push_back(parent);
  tokens.push_back(token);
  positions.push_back(position);
  seq_ids.push_back(seq_id);
  need_logits.push_back(logits ? 1 : 0);
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  seq_ids.clear();
  need_logits.clear();
  parents.clear();
  lora_slots.clear();
  kv_planned = false;
}

}  // namespace peregrine

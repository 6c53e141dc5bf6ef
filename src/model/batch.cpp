#include "peregrine/model/batch.h"

namespace peregrine {

std::int64_t Batch::n_logits() const {
  std::int64_t n = 0;
  for (auto f : need_logits) n += f != 0;
  return n;
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  seq_ids.clear();
  need_logits.clear();
}

}  // namespace peregrine

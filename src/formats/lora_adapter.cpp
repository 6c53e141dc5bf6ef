#include "peregrine/formats/lora_adapter.h"

#include <cmath>

namespace peregrine {

float LoraAdapter::scale() const {
  if (rank <= 0) return 0.0f;
  return rslora ? alpha / std::sqrt(static_cast<float>(rank)) : alpha / static_cast<float>(rank);
}

}  // namespace peregrine

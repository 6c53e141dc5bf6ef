#include "peregrine/model/final_hidden.h"

namespace peregrine {

void FinalHiddenCapture::observe_hidden(std::int64_t layer, std::span<const float> h, std::int64_t) {
  if (layer == n_layers_) h_.assign(h.begin(), h.end());
}

}  // namespace peregrine

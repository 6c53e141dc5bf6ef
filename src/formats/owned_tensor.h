// A tensor view together with the buffer it points into: what the readers decode a quantized
// layout into (kept alive by ModelFile::storage) and what the writers reorder rows into.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "peregrine/core/tensor.h"

namespace peregrine {

struct OwnedTensor {
  TensorView view;                                         // data / nbytes: *bytes, or a view
  std::shared_ptr<const std::vector<std::uint8_t>> bytes;  // of bytes owned elsewhere (null)
};

/// `meta` (name, dtype, shape, quant) pointing at `bytes`, which the result owns.
OwnedTensor own_tensor(TensorView meta, std::vector<std::uint8_t> bytes);

}  // namespace peregrine

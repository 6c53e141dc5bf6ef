#include "formats/owned_tensor.h"

namespace peregrine {

OwnedTensor own_tensor(TensorView meta, std::vector<std::uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  meta.data = owned->data();
  meta.nbytes = owned->size();
  return {std::move(meta), std::move(owned)};
}

}  // namespace peregrine

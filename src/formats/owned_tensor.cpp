#include "formats/owned_tensor.h"

#include <cstring>
#include <span>

#include "peregrine/quant/dequantize.h"

namespace peregrine {

OwnedTensor own_tensor(TensorView meta, std::vector<std::uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  meta.data = owned->data();
  meta.nbytes = owned->size();
  return {std::move(meta), std::move(owned)};
}

OwnedTensor shifted_norm(const TensorView& t, float delta) {
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  dequantize(t.dtype, t.data, values);
  for (float& v : values) v += delta;
  std::vector<std::uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  TensorView meta = t;
  meta.dtype = DType::kF32;
  return own_tensor(std::move(meta), std::move(bytes));
}

}  // namespace peregrine

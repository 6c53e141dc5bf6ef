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

/// An RMSNorm weight `t` (f32 / f16 / bf16, as validate_llama_tensors requires) as an f32
/// tensor with `delta` added to every value: a Gemma norm moved between its Hugging Face form
/// w (applied as 1 + w) and its GGUF form 1 + w (convert_hf_to_gguf.py Gemma2Model).
OwnedTensor shifted_norm(const TensorView& t, float delta);

}  // namespace peregrine

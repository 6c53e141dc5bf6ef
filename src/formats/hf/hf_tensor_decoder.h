// One canonical tensor of a Hugging Face folder from the safetensors tensors it is stored as:
// a float weight in place, or a quantized linear decoded from its layout (GPTQ, AWQ,
// compressed) into the runtime format of core/dtype.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hf/hf_quant_config.h"
#include "formats/hf/hf_quant_parts.h"
#include "formats/owned_tensor.h"

namespace peregrine {

/// The tensor `name` (canonical) of shape `shape` stored as `parts` of the HF module `module`
/// ("model.layers.0.mlp.down_proj"): an F32/F16/BF16 "weight" as a view into the file (bytes
/// null), "qweight"… decoded per q.method (GPTQ / AWQ), an I8 / FP8 "weight" with
/// "weight_scale" per the compressed layout. Errors: kCorruptFile (parts that do not form one
/// layout, a quantized norm, or the layout's own errors); kUnsupported (quantized tensors the
/// config does not describe, and the layouts' own).
Expected<OwnedTensor> decode_hf_tensor(const std::string& module, const HfParts& parts, const HfQuantConfig& q,
                                       const std::string& name, const std::vector<std::int64_t>& shape);

}  // namespace peregrine

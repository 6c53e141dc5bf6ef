// Which quantization_config save_hf_model writes for a model: one layout and one set of
// parameters for all its quantized linears.
#pragma once

#include "formats/hf/hf_quant_config.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/formats/model_writer.h"

namespace peregrine {

/// The quantization config `m` is written with when kInt linears are asked to use `layout`:
/// kNone when every tensor is F32/F16/BF16; kCompressed when `layout` is kCompressed, a linear
/// is F8, or a kInt linear has act_bits 8 (each kInt linear must then be symmetric and
/// per-channel); otherwise GPTQ / AWQ with the kInt linears' common bits and symmetry, and
/// group_size -1 when every linear is per-channel (group_size >= its row length), else their
/// one group size G (a per-channel linear then needs rows of at most G values). GPTQ files
/// use checkpoint_format "gptq" (v1, AutoGPTQ's zero − 1) unless an asymmetric group has zero
/// point 0, which v1 cannot store: then "gptq_v2".
/// Errors: kInvalidArgument (a tensor whose bytes do not match its shape and dtype);
/// kUnsupported naming the tensor (Q8_0 / Q4_0 / I8 tensors, which safetensors cannot
/// hold; kInt linears with different bits, symmetry, act_bits, outlier_threshold or group
/// sizes; AWQ with bits other than 4; a linear the compressed layout cannot hold).
Expected<HfQuantConfig> plan_hf_quant(const ModelFile& m, HfQuantLayout layout);

}  // namespace peregrine

// Merging LoRA adapters (model/lora_adapter.h) into a model's f32 working copy: each adapted
// weight W [out, in] becomes W + user_scale · s · B · A (s = LoraAdapter::scale()), the merge
// of PEFT's merge_and_unload / llama.cpp's llama-export-lora. The result is written with the
// model writers and quantized like any other model.
#pragma once

#include "peregrine/core/status.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/quant/float_model.h"

namespace peregrine {

/// Adds user_scale · adapter.scale() · B · A to every weight the adapter names (all checked
/// before any is changed; A and B in `m`'s Q/K row order, as load_lora_adapter gives them for
/// the base `m` was made from). Errors: kInvalidArgument (user_scale not finite; a weight `m`
/// does not have or of another shape than the pair's [out, in]; A / B sizes that do not match
/// the pair's rank, in and out), naming the tensor.
Status merge_lora(FloatModel& m, const LoraAdapter& adapter, float user_scale);

}  // namespace peregrine

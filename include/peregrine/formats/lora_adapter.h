// LoRA adapters (Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models"): for a
// base weight W [out, in] the adapter adds ΔW = s · B · A with A [r, in], B [out, r] and
// s = alpha / r (rsLoRA, Kalajdzievski 2023: alpha / sqrt(r)). Read from
//   - a Hugging Face PEFT folder: adapter_config.json (r, lora_alpha, target_modules,
//     use_rslora, bias "none", fan_in_fan_out false) + adapter_model.safetensors with
//     "base_model.model.model.layers.{L}.self_attn.{q,k,v,o}_proj.lora_A.weight" [r, in] /
//     ".lora_B.weight" [out, r] and "...mlp.{gate,up,down}_proj..." (PEFT's save_pretrained);
//   - llama.cpp's LoRA GGUF (convert_lora_to_gguf.py): general.type = "adapter",
//     adapter.type = "lora", adapter.lora.alpha, tensors "blk.{L}.{attn_q,...}.weight.lora_a"
//     [r, in] (ggml ne = {in, r}) / ".lora_b" [out, r].
// Tensors are keyed by the canonical name of the base weight they adapt (formats/model_file.h:
// "blk.3.attn_q.weight"), stored f32 row-major.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// One adapted weight: ΔW = scale · B · A.
struct LoraPair {
  std::int64_t rank = 0, in = 0, out = 0;
  std::vector<float> a;  // [rank, in]
  std::vector<float> b;  // [out, rank]
};

struct LoraAdapter {
  std::string path;
  std::int64_t rank = 0;
  float alpha = 0.0f;
  bool rslora = false;
  std::map<std::string, LoraPair> tensors;  // by the base weight's canonical name

  /// alpha / rank, or alpha / sqrt(rank) with rsLoRA.
  float scale() const;
};

/// Reads a PEFT folder or a llama.cpp LoRA GGUF at `path` for the base model `base` (its
/// config and canonical tensors give the expected shapes). Errors: kNotFound (no such file or
/// folder, no adapter_config.json / adapter_model.safetensors), kCorruptFile (bad JSON, a damaged
/// safetensors / GGUF file, an A without its B), kInvalidArgument (rank 0; a target module or
/// tensor the base has no weight for, or whose shape does not match the base weight, naming the
/// tensor; bias other than "none"; fan_in_fan_out; a GGUF that is not a LoRA adapter), kUnsupported
/// (a tensor dtype other than F32 / F16 / BF16).
Expected<LoraAdapter> load_lora_adapter(const std::string& path, const ModelFile& base);

/// Writes `adapter` as a PEFT folder `dir` (created): adapter_config.json (peft_type "LORA",
/// task_type "CAUSAL_LM", r, lora_alpha, use_rslora, target_modules, bias "none",
/// base_model_name_or_path = `base_model`) and adapter_model.safetensors (F32, PEFT's names).
/// Errors: kInvalidArgument (a tensor of the wrong size, a name that is not a canonical layer
/// weight), kIoError.
Status save_peft_adapter(const LoraAdapter& adapter, const std::string& dir, const std::string& base_model);

}  // namespace peregrine

// LoRA adapters (Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large Language Models"): for a
// base weight W [out, in] the adapter adds ΔW = s · B · A with A [r, in], B [out, r] and
// s = alpha / r (rsLoRA, Kalajdzievski 2023: alpha / sqrt(r)). Read from
//   - a Hugging Face PEFT folder (peft src/peft/utils/save_and_load.py get_peft_model_state_dict,
//     src/peft/tuners/lora/config.py LoraConfig): adapter_config.json with "r", "lora_alpha",
//     "target_modules" (a list of module names, matched as PEFT does: the module's name or its
//     last components; PEFT's "all-linear" shorthand; any other string is a regex: refused,
//     kUnsupported), "use_rslora", "bias" "none", "fan_in_fan_out" false; refused with
//     kUnsupported: non-empty "rank_pattern" / "alpha_pattern" (per-module rank or alpha),
//     "use_dora", "lora_bias", "modules_to_save", lm_head / embed_tokens targets. The adapter
//     name is not in PEFT's keys: adapter_model.safetensors holds
//     "base_model.model.model.layers.{L}.self_attn.{q,k,v,o}_proj.lora_A.weight" [r, in] /
//     ".lora_B.weight" [out, r] and "...mlp.{gate,up,down}_proj..." (F32 / F16 / BF16), the
//     module names of formats/hf/hf_names.h (MoE experts included). Q/K rows (B's rows of attn_q /
//     attn_k) are in Hugging Face's NeoX order and are reordered into the base's pairing.
//   - llama.cpp's LoRA GGUF (convert_lora_to_gguf.py, src/llama-adapter.cpp
//     llama_adapter_lora_init_impl): general.type = "adapter", general.architecture = the
//     base's, adapter.type = "lora", adapter.lora.alpha (f32; absent or 0: scale 1, as
//     llama_adapter_lora_weight::get_scale), tensors "blk.{L}.{attn_q,...}.weight.lora_a" [r, in]
//     (ggml ne = {in, r}) / ".lora_b" [out, r] (ggml ne = {r, out}: neither is transposed, the
//     converter writes PEFT's A and B as they are, B's Q/K rows permuted like the base's into
//     the family's GGUF pairing); any tensor type the GGUF reader decodes (F32, F16, BF16,
//     Q8_0, ...); "*_norm.weight" tensors (mergekit) are skipped as llama.cpp skips them.
//     llama.cpp allows a rank per tensor; here all tensors must share one (kUnsupported).
// Tensors are keyed by the canonical name of the base weight they adapt (formats/model_file.h:
// "blk.3.attn_q.weight"), stored f32 row-major, B's Q/K rows in the base's RoPE pairing.
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
  // The base these tensors are laid out for (load_lora_adapter sets them from the base's
  // config; save_peft_adapter uses them to write Hugging Face names and NeoX Q/K rows):
  std::string arch = "llama";                  // the base's family (model/spec/architecture.h)
  RopeStyle rope_style = RopeStyle::kNeox;     // the pairing of B's attn_q / attn_k rows
  std::int64_t head_dim = 0;                   // needed when rope_style is kInterleaved

  /// alpha / rank, or alpha / sqrt(rank) with rsLoRA (0 when rank < 1).
  float scale() const;
};

/// Reads a PEFT folder or a llama.cpp LoRA GGUF at `path` for the base model `base` (its
/// config and canonical tensors give the expected shapes). Errors: kNotFound (no such file or
/// folder, no adapter_config.json / adapter_model.safetensors), kCorruptFile (bad JSON, a damaged
/// safetensors / GGUF file, an A without its B, a tensor name that is not PEFT's / llama.cpp's),
/// kInvalidArgument (rank 0; a target module or tensor the base has no weight for, or whose
/// shape does not match the base weight, naming the tensor; bias other than "none";
/// fan_in_fan_out; a GGUF that is not a LoRA adapter or is for another architecture),
/// kUnsupported (a regex target_modules, rank_pattern / alpha_pattern, DoRA, lora_bias,
/// modules_to_save, lm_head / embed_tokens / output / token_embd targets, ranks that differ
/// between tensors, a safetensors dtype other than F32 / F16 / BF16, a ggml type the GGUF
/// reader does not decode).
Expected<LoraAdapter> load_lora_adapter(const std::string& path, const ModelFile& base);

/// Writes `adapter` as a PEFT folder `dir` (created): adapter_config.json (peft_type "LORA",
/// task_type "CAUSAL_LM", r, lora_alpha, use_rslora, target_modules, bias "none",
/// fan_in_fan_out false, base_model_name_or_path = `base_model`) and adapter_model.safetensors
/// (F32, PEFT's names under adapter.arch's Hugging Face names, attn_q / attn_k B rows moved from
/// adapter.rope_style to NeoX order). load_lora_adapter reads it back to the same values.
/// Errors: kInvalidArgument (a tensor of the wrong size or another rank, a name that is not a
/// canonical layer weight, rank < 1, interleaved Q/K rows without head_dim), kIoError.
Status save_peft_adapter(const LoraAdapter& adapter, const std::string& dir, const std::string& base_model);

}  // namespace peregrine

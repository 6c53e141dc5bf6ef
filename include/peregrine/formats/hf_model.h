// Hugging Face model folder (config.json + safetensors) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// `dir` holds config.json (LlamaForCausalLM / MistralForCausalLM fields: hidden_size,
/// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
/// rms_norm_eps, rope_theta, vocab_size, max_position_embeddings, tie_word_embeddings) and
/// model.safetensors or model.safetensors.index.json + shards. Tensors F32/F16/BF16 are mapped
/// in place and renamed to the canonical names. RoPE: NeoX halves (rotate_half).
/// Errors: kNotFound (no config.json / weights), kCorruptFile (bad JSON, missing fields, bad
/// safetensors header), kUnsupported (architecture or dtype).
Expected<ModelFile> load_hf_model(const std::string& dir);

}  // namespace peregrine

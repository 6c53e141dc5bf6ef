// Hugging Face model folder (config.json + safetensors) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Loads a Hugging Face Llama/Mistral checkpoint folder (transformers' LlamaForCausalLM /
/// MistralForCausalLM, save_pretrained layout).
///
/// config.json: `architectures` containing LlamaForCausalLM or MistralForCausalLM, or
/// `model_type` "llama"/"mistral". Required integers: hidden_size, intermediate_size,
/// num_hidden_layers, num_attention_heads. Optional (null = absent): num_key_value_heads
/// (default num_attention_heads), head_dim (default hidden_size / num_attention_heads),
/// rms_norm_eps (1e-6), rope_theta (10000), vocab_size (default: rows of embed_tokens),
/// max_position_embeddings (2048; capped at `sliding_window` when that is smaller, where
/// sliding-window attention equals full attention), tie_word_embeddings (false; a checkpoint
/// without lm_head.weight is treated as tied).
///
/// Weights: model.safetensors, or model.safetensors.index.json whose "weight_map" maps each
/// tensor to a shard file in the folder (every shard must exist and hold its tensors). F32/F16/
/// BF16 tensors are mapped in place (never copied or permuted; all shard mappings are kept in
/// ModelFile::storage) and renamed to the canonical names of model_file.h:
///   model.embed_tokens.weight → token_embd.weight   model.norm.weight → output_norm.weight
///   lm_head.weight → output.weight                  model.layers.N.* → blk.N.*:
///   self_attn.{q,k,v,o}_proj → attn_{q,k,v,output}  mlp.{gate,up,down}_proj → ffn_{gate,up,down}
///   input_layernorm → attn_norm                     post_attention_layernorm → ffn_norm
/// (self_attn.rotary_emb.inv_freq buffers are skipped). RoPE: RopeStyle::kNeox (rotate_half).
/// The result passes validate_llama_tensors.
///
/// Errors: kNotFound (no such folder, no config.json, no weights, a missing shard);
/// kInvalidArgument (`dir` is a file); kCorruptFile (malformed JSON, a required field missing
/// or ill-typed (named), a bad safetensors header, a tensor missing from its shard, a layer
/// index past num_hidden_layers, missing tensors / wrong shapes); kUnsupported (another
/// architecture, rope_scaling set, hidden_act other than silu, attention/MLP biases, a tensor
/// dtype other than F32/F16/BF16, a tensor name outside the Llama layout).
Expected<ModelFile> load_hf_model(const std::string& dir);

}  // namespace peregrine

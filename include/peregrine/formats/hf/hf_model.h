// Hugging Face model folder (config.json + safetensors) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Loads a Hugging Face checkpoint folder of a family of model/spec/architecture.h (transformers'
/// LlamaForCausalLM / MistralForCausalLM / Qwen2 / Qwen3 / Phi3 / Gemma2ForCausalLM,
/// save_pretrained layout).
///
/// config.json: `architectures` naming a family's class (or MistralForCausalLM), or its
/// `model_type`. Required integers: hidden_size, intermediate_size, num_hidden_layers,
/// num_attention_heads. Optional (null = absent): num_key_value_heads (default
/// num_attention_heads), head_dim (default hidden_size / num_attention_heads), rms_norm_eps
/// (1e-6), rope_theta (10000), vocab_size (default: rows of embed_tokens),
/// max_position_embeddings (2048), tie_word_embeddings (false; a checkpoint without
/// lm_head.weight is treated as tied), peregrine_ffn_down_hadamard (false; see
/// ModelConfig::ffn_down_hadamard); hidden_activation / hidden_act (silu or gelu_pytorch_tanh;
/// default the family's); sliding_window (→ ModelConfig::sliding_window on the family's local
/// layers; 0 when use_sliding_window is false; Qwen2's use_sliding_window with
/// max_window_layers below num_hidden_layers is kUnsupported; a layer_types list must name the
/// family's local layers); query_pre_attn_scalar (→ attn_scale = its^-0.5),
/// attn_logit_softcapping, final_logit_softcapping (>= 0, else kCorruptFile). Gemma 2's norms:
/// post_attention_layernorm → post_attention_norm, pre_feedforward_layernorm → ffn_norm,
/// post_feedforward_layernorm → post_ffw_norm, applied as 1 + w (norm_weight_offset).
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
/// Quantized linears (model_writer.h's HfQuantLayout; config.json "quantization_config", or
/// AutoGPTQ's quantize_config.json) are repacked into owned buffers (ModelFile::storage) in the
/// runtime layouts of core/dtype.h, QuantParams from the config: GPTQ "<module>.qweight /
/// qzeros / scales / g_idx" and AWQ GEMM "<module>.qweight / qzeros / scales" → kInt
/// (formats/hf/gptq_layout.h, awq_layout.h in src: packing, zero-point conventions, padding);
/// compressed "<module>.weight" I8 / F8_E4M3 / F8_E5M2 + "weight_scale" → kInt (symmetric,
/// per-channel) / kF8E4M3 / kF8E5M2. Act-order GPTQ files (g_idx other than i / group_size)
/// are rejected with kUnsupported.
///
/// Errors: kNotFound (no such folder, no config.json, no weights, a missing shard);
/// kInvalidArgument (`dir` is a file); kCorruptFile (malformed JSON, a required field missing
/// or ill-typed (named), a bad safetensors header, a tensor missing from its shard, a layer
/// index past num_hidden_layers, missing tensors / wrong shapes, a quantized linear whose
/// tensors are missing, of the wrong dtype or shape, or hold bad scales / zero points, each
/// error naming the tensor; a rope_scaling field missing or out of range); kUnsupported (another
/// architecture, a rope_scaling type other than default / linear / llama3, hidden_act
/// other than silu, attention/MLP biases, a safetensors dtype outside F32/F16/BF16/I32/I8/F8,
/// raw int / FP8 tensors no quantization_config describes, another quant_method, bits outside
/// {2,3,4,8}, act-order g_idx, a tensor name outside the Llama layout).
Expected<ModelFile> load_hf_model(const std::string& dir);

}  // namespace peregrine

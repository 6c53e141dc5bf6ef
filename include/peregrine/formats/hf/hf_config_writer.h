// ModelConfig → a Hugging Face LlamaForCausalLM config.json (the fields hf_model.h reads).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "peregrine/core/dtype.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// config.json object for `c` (architectures and model_type of c.arch's family, e.g.
/// LlamaForCausalLM / llama, Qwen2ForCausalLM / qwen2 (whose Q/K/V biases are implied), hidden_act
/// silu, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
/// num_key_value_heads, head_dim, vocab_size, max_position_embeddings, rms_norm_eps,
/// rope_theta, tie_word_embeddings, bos/eos ids 1/2 as in Llama 2, and
/// peregrine_ffn_down_hadamard = true when c.ffn_down_hadamard, rope_scaling {rope_type, factor,
/// and for llama3 low_freq_factor, high_freq_factor, original_max_position_embeddings} when
/// c.rope_scaling is set; with experts: MixtralForCausalLM / mixtral for the llama family,
/// num_local_experts (Mixtral) or num_experts, num_experts_per_tok, moe_intermediate_size
/// when it differs from intermediate_size, shared_expert_intermediate_size, norm_topk_prob),
/// with torch_dtype naming
/// `dtype` (float32, float16 or bfloat16). RoPE pairs are HF's halves regardless of
/// c.rope_style: the Q/K rows must be in HF order.
nlohmann::ordered_json hf_config(const ModelConfig& c, DType dtype);

/// hf_config(c, dtype) as text: pretty-printed, 2-space indent, a final newline.
std::string hf_config_json(const ModelConfig& c, DType dtype);

}  // namespace peregrine

// The decoder families Peregrine runs, as data (issue #17): what a family's files call it and
// which tensors it adds to the Llama layout of model_file.h. The forward (model/llama_model.h)
// reads only the tensors a model has — a layer with Q/K/V biases adds them, one with Q/K norms
// applies them — so a family is a row of this table, not a branch in the forward.
//
// Sources: llama.cpp's llama-arch.cpp (architecture names, tensor names, metadata keys) and
// rope types (llama-model.cpp llama_model_rope_type: LLAMA_ROPE_TYPE_NORM pairs (2i, 2i+1), so
// convert_hf_to_gguf.py permutes LlamaModel's Q/K rows; NEOX keeps HF's halves, as for Qwen2 /
// Qwen3, Phi-3); Hugging Face transformers' modeling_llama.py, modeling_qwen2.py,
// modeling_qwen3.py, modeling_phi3.py; llama.cpp src/models/phi3.cpp (fused ffn_up).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace peregrine {

/// How RoPE pairs the dims of a head.
enum class RopeStyle : std::uint8_t {
  kInterleaved,  // pairs (2i, 2i+1): Meta/llama2.c/llama-arch GGUF
  kNeox,         // pairs (i, i + hd/2): Hugging Face rotate_half, NEOX-type GGUF architectures
};

struct Architecture {
  std::string_view name;           // GGUF general.architecture, the prefix of its metadata keys
  std::string_view hf_class;       // config.json "architectures" entry (written; read too)
  std::string_view hf_model_type;  // config.json "model_type"
  RopeStyle gguf_rope_style;       // Q/K row order of this family's GGUF files
  bool qkv_bias;                   // blk.L.attn_{q,k,v}.bias [q_dim / kv_dim] (Qwen2)
  bool qk_norm;                    // blk.L.attn_{q,k}_norm.weight [head_dim]: RMSNorm of each
                                   // head of q and k before RoPE (Qwen3)
  bool fused_gate_up;              // the FFN's gate and up stored as one tensor (Phi-3: GGUF
                                   // ffn_up [2·ffn, dim], HF mlp.gate_up_proj; Q/K/V as one
                                   // attn_qkv / qkv_proj), split on load (formats/fused_projections.h)
};

/// Every family: llama (Llama 1/2/3, Mistral), qwen2 (Qwen2, Qwen2.5), qwen3, phi3 (Phi-3, Phi-3.5).
std::span<const Architecture> architectures();

/// The family whose GGUF name is `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);

/// The family a config.json names by an "architectures" class or a "model_type" (Mistral's
/// MistralForCausalLM / mistral are the llama family), or nullptr.
const Architecture* find_hf_architecture(std::string_view class_or_model_type);

/// "llama, qwen2, qwen3" (for messages).
std::string supported_architecture_names();

}  // namespace peregrine

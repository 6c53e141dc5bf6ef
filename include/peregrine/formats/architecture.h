// The decoder families Peregrine runs, as data (issue #17): what a family's files call it and
// which tensors it adds to the Llama layout of model_file.h. The forward (model/llama_model.h)
// reads only the tensors a model has — a layer with Q/K/V biases adds them, one with Q/K norms
// applies them — so a family is a row of this table, not a branch in the forward.
//
// Sources: llama.cpp's llama-arch.cpp (architecture names, tensor names, metadata keys) and
// rope types (llama-model.cpp llama_model_rope_type: LLAMA_ROPE_TYPE_NORM pairs (2i, 2i+1), so
// convert_hf_to_gguf.py permutes LlamaModel's Q/K rows; NEOX keeps HF's halves, as for Qwen2 /
// Qwen3, Phi-3, Qwen2-MoE, OLMoE); Hugging Face transformers' modeling_llama.py,
// modeling_qwen2.py, modeling_qwen3.py, modeling_phi3.py, modeling_mixtral.py,
// modeling_qwen2_moe.py, modeling_olmoe.py; llama.cpp src/models/phi3.cpp (fused ffn_up),
// llama-graph.cpp build_moe_ffn (expert routing).
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

/// Which RMSNorm a family applies to q and k after the projections (and biases), before RoPE.
enum class QkNorm : std::uint8_t {
  kNone,
  kPerHead,  // blk.L.attn_{q,k}_norm.weight [head_dim], each head on its own (Qwen3)
  kWhole,    // [n_heads·head_dim] / [n_kv_heads·head_dim], the whole projection (OLMoE)
};

/// How a family's Hugging Face checkpoints name their Mixture-of-Experts block.
enum class HfMoeNaming : std::uint8_t {
  kMixtral,  // block_sparse_moe.gate, block_sparse_moe.experts.E.{w1 (gate), w3 (up), w2 (down)}
  kQwenMoe,  // mlp.gate, mlp.experts.E.{gate,up,down}_proj, mlp.shared_expert.*, mlp.shared_expert_gate
};

struct Architecture {
  std::string_view name;           // GGUF general.architecture, the prefix of its metadata keys
  std::string_view hf_class;       // config.json "architectures" entry (written; read too)
  std::string_view hf_model_type;  // config.json "model_type"
  RopeStyle gguf_rope_style;       // Q/K row order of this family's GGUF files
  bool qkv_bias;                   // blk.L.attn_{q,k,v}.bias [q_dim / kv_dim] (Qwen2)
  QkNorm qk_norm;                  // blk.L.attn_{q,k}_norm.weight (Qwen3, OLMoE)
  bool fused_gate_up;              // the FFN's gate and up stored as one tensor (Phi-3: GGUF
                                   // ffn_up [2·ffn, dim], HF mlp.gate_up_proj; Q/K/V as one
                                   // attn_qkv / qkv_proj), split on load (formats/fused_projections.h)
  // Mixture-of-Experts (used when the config has experts, ModelConfig::n_experts):
  bool expert_weights_norm;        // the top-k router probabilities are renormalized to sum to 1
                                   // (Mixtral; Qwen2-MoE and OLMoE keep the softmax over all
                                   // experts unless config.json's norm_topk_prob says otherwise)
  HfMoeNaming hf_moe_naming;
  std::string_view hf_moe_class;   // the config.json class of this family's MoE variant when it
  std::string_view hf_moe_model_type;  // differs ("MixtralForCausalLM" / "mixtral"), else ""
};

/// Every family: llama (Llama 1/2/3, Mistral, Mixtral), qwen2 (Qwen2, Qwen2.5), qwen3, phi3
/// (Phi-3, Phi-3.5), qwen2moe (Qwen1.5-MoE, Qwen2-MoE), olmoe (OLMoE).
std::span<const Architecture> architectures();

/// The family whose GGUF name is `name`, or nullptr.
const Architecture* find_architecture(std::string_view name);

/// The family a config.json names by an "architectures" class or a "model_type" (Mistral's
/// MistralForCausalLM / mistral and Mixtral's MixtralForCausalLM / mixtral are the llama
/// family), or nullptr.
const Architecture* find_hf_architecture(std::string_view class_or_model_type);

/// "llama, qwen2, qwen3" (for messages).
std::string supported_architecture_names();

}  // namespace peregrine

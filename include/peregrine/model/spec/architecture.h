// The decoder families Peregrine runs, as data (issue #17): what a family's files call it and
// which tensors it adds to the Llama layout of model_file.h. The forward (model/llama_model.h)
// reads only the tensors a model has — a layer with Q/K/V biases adds them, one with Q/K norms
// applies them — and the ModelConfig fields the loaders fill from this table (activation,
// embedding scale, norm weight offset, sliding-window layer pattern, soft-capping), so a family
// is a row of this table, not a branch in the forward.
//
// Gemma 2 (gemma2; transformers' modeling_gemma2.py, llama.cpp's gemma2 graph): GeGLU with the
// tanh GELU, the embedding scaled by sqrt(dim), RMSNorm by (1 + w) in Hugging Face checkpoints
// (llama.cpp's convert_hf_to_gguf.py Gemma2Model stores 1 + w in GGUF: hf_norm_offset), a
// post-attention and a post-FFN RMSNorm of each block's output before its residual add,
// attention-score and final-logit soft-capping, scores scaled by query_pre_attn_scalar^-0.5, and
// sliding-window attention on every other layer (layers 0, 2, 4, …: modeling_gemma2.py
// is_sliding = not layer_idx % 2, llama.cpp set_swa_pattern(2)). Mistral is the llama family
// with a sliding window on every layer.
//
// Gemma 3 (gemma3; modeling_gemma3.py, llama.cpp src/models/gemma3.cpp) is Gemma 2 without the
// soft-caps, with Q/K RMSNorm per head (GGUF: 1 + w, as every Gemma norm), five local layers to
// one global (l % 6 != 5: sliding_window_pattern 6) and its own RoPE base on the local layers
// (rope_local_base_freq 10 000; the file's rope.freq_base, 1 000 000, and any rope scaling on
// the global ones).
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

#include "peregrine/core/ffn_activation.h"
#include "peregrine/core/rope_style.h"

namespace peregrine {

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
  bool expert_weights_norm = false;  // the top-k router probabilities are renormalized to sum to 1
                                   // (Mixtral; Qwen2-MoE and OLMoE keep the softmax over all
                                   // experts unless config.json's norm_topk_prob says otherwise)
  HfMoeNaming hf_moe_naming = HfMoeNaming::kQwenMoe;
  std::string_view hf_moe_class = {};  // the config.json class of this family's MoE variant when it
  std::string_view hf_moe_model_type = {};  // differs ("MixtralForCausalLM" / "mixtral"), else ""
  // Gemma 2's additions (defaults: Llama's).
  bool post_norms = false;         // blk.L.post_attention_norm / post_ffw_norm [dim]: RMSNorm of
                                   // the attention / FFN output before its residual add (HF
                                   // post_attention_layernorm / post_feedforward_layernorm, the
                                   // pre-FFN norm being pre_feedforward_layernorm)
  FfnActivation activation = FfnActivation::kSilu;  // of GGUF files; config.json's default
  bool embed_scale_sqrt_dim = false;  // embedding rows × sqrt(dim)
  float hf_norm_offset = 0.0f;     // HF checkpoints' RMSNorm scales by (offset + w); GGUF files
                                   // store offset + w (convert_hf_to_gguf.py)
  std::int64_t sliding_window_period = 0;  // ModelConfig::sliding_window_period of the family
  float gguf_attn_softcap = 0.0f;  // soft-caps when a GGUF file has no {arch}.attn_logit_softcapping
  float gguf_final_softcap = 0.0f; // / {arch}.final_logit_softcapping (llama.cpp's hparams: 50, 30)
  std::int64_t gguf_scale_dim_layers = 0;  // llama.cpp's Gemma 2 rule for a GGUF without
                                   // {arch}.attention.scale: a model of this many layers (27B: 46)
                                   // scales scores by (dim / n_heads)^-0.5, others head_dim^-0.5
  float rope_theta_local = 0.0f;   // ModelConfig::rope_theta_local of the family (Gemma 3:
                                   // 10 000, llama.cpp's rope_freq_base_train_swa); 0: none
};

/// Every family: llama (Llama 1/2/3, Mistral, Mixtral), qwen2 (Qwen2, Qwen2.5), qwen3, phi3
/// (Phi-3, Phi-3.5), qwen2moe (Qwen1.5-MoE, Qwen2-MoE), olmoe (OLMoE), gemma2 (Gemma 2), gemma3
/// (Gemma 3, text).
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

// Hugging Face tensor names (modeling_llama.py / modeling_qwen2.py / modeling_qwen3.py /
// modeling_phi3.py / modeling_gemma2.py / modeling_mixtral.py / modeling_qwen2_moe.py /
// modeling_olmoe.py) ↔ the canonical (GGUF) names of model_file.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "peregrine/model/spec/architecture.h"

namespace peregrine {

/// Per-layer suffixes every family shares: "model.layers.N.<hf>" ↔ "blk.N.<canonical>".
inline constexpr std::pair<std::string_view, std::string_view> kHfLayerNames[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},             // Qwen2
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},    // Qwen3, OLMoE
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},     // Phi-3's fused forms (split on load)
    {"mlp.gate_up_proj.weight", "ffn_gate_up.weight"},
};

/// The layer norms of a family with post-block norms (Architecture::post_norms, Gemma 2), which
/// take precedence over kHfLayerNames: its post_attention_layernorm follows attention (llama.cpp
/// post_attention_norm) and pre_feedforward_layernorm is the FFN's input norm.
inline constexpr std::pair<std::string_view, std::string_view> kHfPostNormLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

/// The canonical per-layer suffix of HF suffix `hf` ("self_attn.q_proj.weight" →
/// "attn_q.weight") in `family` (nullptr: Llama's names); Mixture-of-Experts names in either
/// naming ("block_sparse_moe.experts.7.w3.weight" and "mlp.experts.7.up_proj.weight" →
/// "ffn_up.7.weight"); nullopt when no table has it.
std::optional<std::string> canonical_layer_name(std::string_view hf, const Architecture* family);

/// Whole-model tensors: HF name ↔ canonical name.
inline constexpr std::pair<std::string_view, std::string_view> kHfModelNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

/// The Hugging Face name of a canonical tensor name ("blk.3.attn_q.weight" →
/// "model.layers.3.self_attn.q_proj.weight") in `family`'s checkpoints (nullptr: Llama's
/// names; MoE tensors named by family->hf_moe_naming, Mixtral's for nullptr); nullopt for
/// names outside the tables (and shared-expert tensors under Mixtral's naming).
std::optional<std::string> hf_tensor_name(std::string_view canonical, const Architecture* family = nullptr);

}  // namespace peregrine

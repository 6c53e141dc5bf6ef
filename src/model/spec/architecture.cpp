#include "peregrine/model/spec/architecture.h"

#include <string>

namespace peregrine {
namespace {

using enum QkNorm;
using enum HfMoeNaming;

constexpr Architecture kArchitectures[] = {
    // name, HF class, model_type, GGUF Q/K rows, bias, qk_norm, fused gate/up,
    // MoE: top-k renormalized, HF names, HF class / model_type of the MoE variant
    {"llama", "LlamaForCausalLM", "llama", RopeStyle::kInterleaved, false, kNone, false,
     true, kMixtral, "MixtralForCausalLM", "mixtral"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", RopeStyle::kNeox, true, kNone, false, false, kQwenMoe, "", ""},
    {"qwen3", "Qwen3ForCausalLM", "qwen3", RopeStyle::kNeox, false, kPerHead, false, false, kQwenMoe, "", ""},
    {"phi3", "Phi3ForCausalLM", "phi3", RopeStyle::kNeox, false, kNone, true, false, kQwenMoe, "", ""},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", RopeStyle::kNeox, true, kNone, false, false, kQwenMoe, "", ""},
    {"olmoe", "OlmoeForCausalLM", "olmoe", RopeStyle::kNeox, false, kWhole, false, false, kQwenMoe, "", ""},
    {.name = "gemma2", .hf_class = "Gemma2ForCausalLM", .hf_model_type = "gemma2", .gguf_rope_style = RopeStyle::kNeox,
     .qkv_bias = false, .qk_norm = kNone, .fused_gate_up = false, .post_norms = true,
     .activation = FfnActivation::kGeluTanh, .embed_scale_sqrt_dim = true, .hf_norm_offset = 1.0f,
     .sliding_window_period = 2, .gguf_attn_softcap = 50.0f, .gguf_final_softcap = 30.0f, .gguf_scale_dim_layers = 46},
    {.name = "gemma3", .hf_class = "Gemma3ForCausalLM", .hf_model_type = "gemma3_text", .gguf_rope_style = RopeStyle::kNeox,
     .qkv_bias = false, .qk_norm = kPerHead, .fused_gate_up = false, .post_norms = true,
     .activation = FfnActivation::kGeluTanh, .embed_scale_sqrt_dim = true, .hf_norm_offset = 1.0f,
     .sliding_window_period = 6, .gguf_scale_dim_layers = 62, .rope_theta_local = 10000.0f},
};

}  // namespace

std::span<const Architecture> architectures() { return kArchitectures; }

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Architecture* find_hf_architecture(std::string_view class_or_model_type) {
  if (class_or_model_type == "MistralForCausalLM" || class_or_model_type == "mistral") return find_architecture("llama");
  for (const Architecture& a : kArchitectures) {
    for (std::string_view name : {a.hf_class, a.hf_model_type, a.hf_moe_class, a.hf_moe_model_type}) {
      if (!name.empty() && name == class_or_model_type) return &a;
    }
  }
  return nullptr;
}

std::string supported_architecture_names() {
  std::string out;
  for (const Architecture& a : kArchitectures) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace peregrine

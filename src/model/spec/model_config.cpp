#include "peregrine/model/spec/model_config.h"

#include <cmath>
#include <string>

namespace peregrine {
namespace {

/// A float field that must be finite and >= 0 (a softcap of 0 meaning none).
Status field_non_negative(const char* field, float v) {
  if (!std::isfinite(v) || v < 0.0f) {
    return corrupt_file(std::string("model config: ") + field + " = " + std::to_string(v) + " must be finite and >= 0");
  }
  return Status::ok();
}

Status validate_gemma_fields(const ModelConfig& c) {
  if (c.sliding_window < 0) return corrupt_file("model config: sliding_window = " + std::to_string(c.sliding_window) + " is negative");
  if (c.sliding_window_period < 0) {
    return corrupt_file("model config: sliding_window_period = " + std::to_string(c.sliding_window_period) + " is negative");
  }
  PEREGRINE_RETURN_IF_ERROR(field_non_negative("attn_scale", c.attn_scale));
  PEREGRINE_RETURN_IF_ERROR(field_non_negative("attn_softcap", c.attn_softcap));
  PEREGRINE_RETURN_IF_ERROR(field_non_negative("final_softcap", c.final_softcap));
  PEREGRINE_RETURN_IF_ERROR(field_non_negative("embed_scale", c.embed_scale));
  PEREGRINE_RETURN_IF_ERROR(field_non_negative("rope_theta_local", c.rope_theta_local));
  if (!std::isfinite(c.norm_weight_offset)) return corrupt_file("model config: norm_weight_offset is not finite");
  return Status::ok();
}

Status field_positive(const char* field, std::int64_t v) {
  if (v <= 0) return corrupt_file(std::string("model config: ") + field + " = " + std::to_string(v) + " must be positive");
  return Status::ok();
}

}  // namespace

KvShape ModelConfig::kv_shape() const {
  KvShape shape{n_layers, n_kv_heads, head_dim};
  for (std::int64_t l = 0; l < n_layers && sliding_window > 0; ++l) shape.layer_windows.push_back(layer_window(l));
  return shape;
}

Status ModelConfig::validate() const {
  if (!find_architecture(arch)) {
    return unsupported("model config: architecture '" + arch + "' is not supported (" + supported_architecture_names() + " are)");
  }
  PEREGRINE_RETURN_IF_ERROR(field_positive("dim", dim));
  PEREGRINE_RETURN_IF_ERROR(field_positive("n_layers", n_layers));
  PEREGRINE_RETURN_IF_ERROR(field_positive("n_heads", n_heads));
  PEREGRINE_RETURN_IF_ERROR(field_positive("n_kv_heads", n_kv_heads));
  PEREGRINE_RETURN_IF_ERROR(field_positive("head_dim", head_dim));
  PEREGRINE_RETURN_IF_ERROR(field_positive("ffn_dim", ffn_dim));
  PEREGRINE_RETURN_IF_ERROR(field_positive("vocab_size", vocab_size));
  PEREGRINE_RETURN_IF_ERROR(field_positive("max_seq_len", max_seq_len));
  constexpr std::int64_t kMax = std::int64_t{1} << 24;
  for (auto v : {dim, n_layers, n_heads, ffn_dim, vocab_size, max_seq_len, head_dim}) {
    if (v > kMax) return corrupt_file("model config: a hyper-parameter is absurdly large (" + std::to_string(v) + ")");
  }
  if (n_heads % n_kv_heads != 0) {
    return corrupt_file("model config: n_heads " + std::to_string(n_heads) +
                        " is not a multiple of n_kv_heads " + std::to_string(n_kv_heads));
  }
  if (head_dim % 2 != 0) return corrupt_file("model config: head_dim must be even for RoPE");
  if (!(rope_theta > 0.0f) || !(rms_eps > 0.0f)) {
    return corrupt_file("model config: rope_theta and rms_eps must be positive");
  }
  if (const std::string e = rope_scaling_error(rope_scaling, head_dim); !e.empty()) return corrupt_file("model config: " + e);
  PEREGRINE_RETURN_IF_ERROR(validate_gemma_fields(*this));
  return validate_experts();
}

Status ModelConfig::validate_experts() const {
  if (n_experts == 0) {
    if (n_experts_used != 0 || shared_expert_ffn_dim != 0) {
      return corrupt_file("model config: expert_used_count " + std::to_string(n_experts_used) + " / a shared expert without experts");
    }
    return Status::ok();
  }
  constexpr std::int64_t kMaxExperts = 1 << 12;
  if (n_experts < 0 || n_experts > kMaxExperts) {
    return corrupt_file("model config: expert_count " + std::to_string(n_experts) + " is outside [0, " + std::to_string(kMaxExperts) + "]");
  }
  if (n_experts_used < 1 || n_experts_used > n_experts) {
    return corrupt_file("model config: expert_used_count (top-k) " + std::to_string(n_experts_used) + " is outside [1, expert_count " +
                        std::to_string(n_experts) + "]");
  }
  PEREGRINE_RETURN_IF_ERROR(field_positive("expert_ffn_dim", expert_ffn_dim));
  if (shared_expert_ffn_dim < 0) return corrupt_file("model config: shared_expert_ffn_dim must not be negative");
  constexpr std::int64_t kMax = std::int64_t{1} << 24;
  if (expert_ffn_dim > kMax || shared_expert_ffn_dim > kMax) {
    return corrupt_file("model config: an expert's FFN width is absurdly large");
  }
  return Status::ok();
}

std::int64_t ModelConfig::layer_window(std::int64_t layer) const {
  const std::int64_t l = first_layer + layer;
  const bool local = sliding_window_period < 2 || l % sliding_window_period != sliding_window_period - 1;
  return local ? sliding_window : 0;
}

LayerSpec ModelConfig::layer_spec(std::int64_t layer) const {
  const std::int64_t window = layer_window(layer);
  const bool local_base = window > 0 && rope_theta_local > 0.0f;
  const Architecture* family = find_architecture(arch);
  LayerSpec spec{.window = window, .rope_theta = local_base ? rope_theta_local : rope_theta, .rope_scaled = !local_base};
  if (family != nullptr) {
    spec.qkv_bias = family->qkv_bias;
    spec.qk_norm = family->qk_norm;
    spec.post_norms = family->post_norms;
  }
  spec.norm_weight_offset = norm_weight_offset;
  spec.moe = n_experts > 0;
  spec.activation = activation;
  return spec;
}

void apply_architecture(ModelConfig& c, const Architecture& family) {
  c.arch = std::string(family.name);
  c.activation = family.activation;
  c.embed_scale = family.embed_scale_sqrt_dim ? std::sqrt(static_cast<float>(c.dim)) : 0.0f;
  c.sliding_window_period = family.sliding_window_period;
  c.rope_theta_local = family.rope_theta_local;
}

}  // namespace peregrine

#include "peregrine/formats/hf/hf_config_writer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "peregrine/formats/config_keys.h"

namespace peregrine {
namespace {

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    default: return "float32";
  }
}

/// The double whose shortest decimal form is that of float `f` (1e-5f → 1e-05, not
/// 9.999999747378752e-06), so the JSON reads as written and parses back to `f`.
double as_decimal(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

/// The Mixture-of-Experts fields as the family's config class names them (read back by
/// hf_model.cpp read_experts).
void add_experts(nlohmann::ordered_json& j, const ModelConfig& c, const Architecture& family) {
  j[family.hf_moe_naming == HfMoeNaming::kMixtral ? "num_local_experts" : "num_experts"] = c.n_experts;
  j["num_experts_per_tok"] = c.n_experts_used;
  if (c.expert_ffn_dim != c.ffn_dim) j["moe_intermediate_size"] = c.expert_ffn_dim;
  if (c.shared_expert_ffn_dim > 0) j["shared_expert_intermediate_size"] = c.shared_expert_ffn_dim;
  j["norm_topk_prob"] = c.expert_weights_norm;
}

/// The fields of formats/config_keys.h that hf_model.cpp would not read back without them
/// (config_key_written), Mistral's class for a llama with a window, hidden_activation beside
/// hidden_act, and query_pre_attn_scalar (the scale's ^-2).
void add_attention_variant(nlohmann::ordered_json& j, const ModelConfig& c) {
  for (const ConfigKey& k : config_keys()) {
    if (!config_key_written(k, c, ConfigKeyFormat::kHf)) continue;
    std::visit(
        [&](auto field) {
          const auto v = c.*field;
          if constexpr (std::is_same_v<decltype(v), const float>) {
            j[k.hf] = as_decimal(v);
          } else {
            j[k.hf] = v;
          }
        },
        k.field);
  }
  if (c.sliding_window > 0 && c.arch == "llama" && c.n_experts == 0) {  // transformers' Llama has no window: Mistral's class
    j["architectures"] = nlohmann::ordered_json::array({"MistralForCausalLM"});
    j["model_type"] = "mistral";
  }
  if (c.activation == FfnActivation::kGeluTanh) j["hidden_activation"] = "gelu_pytorch_tanh";
  if (c.attn_scale > 0.0f) {  // an integer in Gemma's configs (256, 144): written as one when it is one
    const double scalar = 1.0 / (static_cast<double>(c.attn_scale) * c.attn_scale), whole = std::round(scalar);
    if (std::fabs(scalar - whole) < 1e-4 * scalar) {
      j["query_pre_attn_scalar"] = static_cast<std::int64_t>(whole);
    } else {
      j["query_pre_attn_scalar"] = scalar;
    }
  }
}

/// LongRoPE as Phi3Config holds it: original_max_position_embeddings at the top level when the
/// factor is max_position_embeddings / it (Phi-3's form), else factor and
/// original_max_position_embeddings inside rope_scaling (hf_model.cpp read_longrope).
void add_longrope(nlohmann::ordered_json& j, nlohmann::ordered_json& s, const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  const auto ratio = static_cast<float>(static_cast<double>(c.max_seq_len) / static_cast<double>(r.original_context));
  if (r.factor == ratio) {
    j["original_max_position_embeddings"] = r.original_context;
    s.erase("factor");
  } else {
    s["original_max_position_embeddings"] = r.original_context;
  }
  if (r.attention_factor > 0.0f) s["attention_factor"] = as_decimal(r.attention_factor);
  for (const auto& [key, factors] : {std::pair{"short_factor", &r.short_factor}, std::pair{"long_factor", &r.long_factor}}) {
    auto& list = s[key] = nlohmann::ordered_json::array();
    for (float f : *factors) list.push_back(as_decimal(f));
  }
}

/// config.json's rope_scaling (read back by hf_model.cpp read_rope_scaling): rope_type and
/// factor, and each kind's own fields.
void add_rope_scaling(nlohmann::ordered_json& j, const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  if (r.kind == RopeScaling::Kind::kNone) return;
  nlohmann::ordered_json s = {{"rope_type", rope_scaling_name(r.kind)}, {"factor", as_decimal(r.factor)}};
  if (r.kind == RopeScaling::Kind::kLlama3) {
    s["low_freq_factor"] = as_decimal(r.low_freq_factor);
    s["high_freq_factor"] = as_decimal(r.high_freq_factor);
  }
  if (r.kind != RopeScaling::Kind::kLinear && r.kind != RopeScaling::Kind::kLongRope) {
    s["original_max_position_embeddings"] = r.original_context;
  }
  if (r.kind == RopeScaling::Kind::kYarn) {
    s["beta_fast"] = as_decimal(r.beta_fast);
    s["beta_slow"] = as_decimal(r.beta_slow);
    if (r.attention_factor > 0.0f) s["attention_factor"] = as_decimal(r.attention_factor);
  }
  if (r.kind == RopeScaling::Kind::kLongRope) add_longrope(j, s, c);
  j["rope_scaling"] = s;
}

}  // namespace

nlohmann::ordered_json hf_config(const ModelConfig& c, DType dtype) {
  const Architecture* arch = find_architecture(c.arch);
  const Architecture& family = arch ? *arch : architectures()[0];  // a validated config names a known family
  const bool moe_class = c.n_experts > 0 && !family.hf_moe_class.empty();  // Mixtral
  nlohmann::ordered_json j = {
      {"architectures", nlohmann::ordered_json::array({std::string(moe_class ? family.hf_moe_class : family.hf_class)})},
      {"model_type", std::string(moe_class ? family.hf_moe_model_type : family.hf_model_type)},
      {"hidden_act", c.activation == FfnActivation::kGeluTanh ? "gelu_pytorch_tanh" : "silu"},
      {"hidden_size", c.dim},
      {"intermediate_size", c.ffn_dim},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_seq_len},
      {"rms_norm_eps", as_decimal(c.rms_eps)},
      {"rope_theta", as_decimal(c.rope_theta)},
      {"tie_word_embeddings", c.tied_embeddings},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", torch_dtype(dtype)},
  };
  if (c.ffn_down_hadamard) j["peregrine_ffn_down_hadamard"] = true;
  add_attention_variant(j, c);
  if (c.n_experts > 0) add_experts(j, c, family);
  add_rope_scaling(j, c);
  return j;
}

std::string hf_config_json(const ModelConfig& c, DType dtype) { return hf_config(c, dtype).dump(2) + "\n"; }

}  // namespace peregrine

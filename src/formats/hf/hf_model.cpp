#include "peregrine/formats/hf/hf_model.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

#include "peregrine/formats/config_keys.h"
#include "formats/hf/config_fields.h"
#include "formats/fused_projections.h"
#include "formats/hf/hf_quant_config.h"
#include "formats/hf/hf_tensor_decoder.h"
#include "peregrine/core/json_util.h"
#include "peregrine/formats/hf/hf_names.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// The family config.json names: the first "architectures" class model/spec/architecture.h knows,
/// else model_type (Mistral is the llama family).
Expected<const Architecture*> read_architecture(const ConfigFields& f) {
  std::string named;  // what the config names instead, for the message
  if (const json* archs = f.get("architectures")) {
    if (!archs->is_array()) {
      return corrupt_file(f.what() + ": field 'architectures' is a " + json_util::type_name(*archs) +
                          ", expected a list of strings");
    }
    for (const auto& a : *archs) {
      if (!a.is_string()) continue;
      const auto& s = a.get_ref<const std::string&>();
      if (const Architecture* arch = find_hf_architecture(s)) return arch;
      if (named.empty()) named = "architecture '" + json_util::printable(s) + "'";
    }
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto model_type, f.optional_string("model_type"));
  if (model_type) {
    if (const Architecture* arch = find_hf_architecture(*model_type)) return arch;
    if (named.empty()) named = "model_type '" + json_util::printable(*model_type) + "'";
  }
  if (named.empty()) {
    return corrupt_file(f.what() + ": names no architecture (no 'architectures' or 'model_type')");
  }
  std::string supported;
  for (const Architecture& a : architectures()) {
    supported += (supported.empty() ? "" : ", ") + std::string(a.hf_class);
    if (!a.hf_moe_class.empty()) supported += ", " + std::string(a.hf_moe_class);
  }
  return unsupported(f.what() + ": " + named + " is not supported (" + supported + ", MistralForCausalLM are)");
}

/// YaRN's fields of a rope_scaling object (factor already read into s).
Status read_yarn(const ConfigFields& f, std::int64_t max_position_embeddings, RopeScaling& s) {
  s.kind = RopeScaling::Kind::kYarn;
  PEREGRINE_ASSIGN_OR_RETURN(auto context, f.optional_int("original_max_position_embeddings"));
  s.original_context = context.value_or(max_position_embeddings);
  PEREGRINE_ASSIGN_OR_RETURN(auto fast, f.optional_float("beta_fast"));
  PEREGRINE_ASSIGN_OR_RETURN(auto slow, f.optional_float("beta_slow"));
  s.beta_fast = fast.value_or(32.0f);
  s.beta_slow = slow.value_or(1.0f);
  PEREGRINE_ASSIGN_OR_RETURN(auto attention, f.optional_float("attention_factor"));
  PEREGRINE_ASSIGN_OR_RETURN(auto mscale, f.optional_float("mscale"));
  PEREGRINE_ASSIGN_OR_RETURN(auto mscale_all_dim, f.optional_float("mscale_all_dim"));
  if (attention) {
    s.attention_factor = *attention;
  } else if (mscale && mscale_all_dim && s.factor > 1.0f) {  // DeepSeek's get_mscale ratio
    const double ln = std::log(static_cast<double>(s.factor));
    s.attention_factor = static_cast<float>((0.1 * *mscale * ln + 1.0) / (0.1 * *mscale_all_dim * ln + 1.0));
  }
  return Status::ok();
}

/// LongRoPE's fields (HF _compute_longrope_parameters, Phi3Config): short_factor and
/// long_factor (required); original_max_position_embeddings at the top level (Phi-3: factor =
/// max_position_embeddings / it), else in rope_scaling (factor from rope_scaling, else that
/// ratio), else max_position_embeddings; attention_factor (else the default, rope_scaling.h).
Status read_longrope(const ConfigFields& config, const ConfigFields& f, std::int64_t max_position_embeddings, RopeScaling& s) {
  s.kind = RopeScaling::Kind::kLongRope;
  PEREGRINE_ASSIGN_OR_RETURN(s.short_factor, f.required_float_list("short_factor"));
  PEREGRINE_ASSIGN_OR_RETURN(s.long_factor, f.required_float_list("long_factor"));
  PEREGRINE_ASSIGN_OR_RETURN(auto top, config.optional_int("original_max_position_embeddings"));
  PEREGRINE_ASSIGN_OR_RETURN(auto inner, f.optional_int("original_max_position_embeddings"));
  s.original_context = top ? *top : inner.value_or(max_position_embeddings);
  PEREGRINE_ASSIGN_OR_RETURN(auto factor, f.optional_float("factor"));
  const float ratio =  // a non-positive context is refused by rope_scaling_error
      s.original_context > 0 ? static_cast<float>(static_cast<double>(max_position_embeddings) / static_cast<double>(s.original_context)) : 1.0f;
  s.factor = top || !factor ? ratio : *factor;
  PEREGRINE_ASSIGN_OR_RETURN(auto attention, f.optional_float("attention_factor"));
  s.attention_factor = attention.value_or(0.0f);
  return Status::ok();
}

/// config.json's rope_scaling (transformers/modeling_rope_utils.py): absent, null or rope_type
/// "default" → none; "linear" (factor); "llama3" (factor, low_freq_factor, high_freq_factor,
/// original_max_position_embeddings, all required as in HF's validation); "yarn" (factor;
/// original_max_position_embeddings, else `max_position_embeddings`; beta_fast, beta_slow;
/// attention_factor, else from mscale / mscale_all_dim as _compute_yarn_parameters does);
/// "longrope" (read_longrope); "dynamic" (factor; original_max_position_embeddings from
/// rope_scaling, else the top level, else `max_position_embeddings`). The legacy key "type" is
/// read when rope_type is absent. Other types are refused by name.
Expected<RopeScaling> read_rope_scaling(const ConfigFields& config, std::int64_t max_position_embeddings, std::int64_t head_dim) {
  RopeScaling s;
  const json* j = config.get("rope_scaling");
  if (!j) return s;
  const std::string what = config.what() + " rope_scaling";
  if (!j->is_object()) return corrupt_file(what + " is a " + json_util::type_name(*j) + ", expected an object");
  ConfigFields f(*j, what);
  PEREGRINE_ASSIGN_OR_RETURN(auto type, f.optional_string("rope_type"));
  if (!type) {
    PEREGRINE_ASSIGN_OR_RETURN(type, f.optional_string("type"));
  }
  if (!type) return corrupt_file(what + " names no rope_type");
  if (*type == "default") return s;
  if (*type != "linear" && *type != "llama3" && *type != "yarn" && *type != "longrope" && *type != "dynamic") {
    return unsupported(what + ": rope_type '" + json_util::printable(*type) +
                       "' is not supported (default, linear, llama3, yarn, longrope and dynamic are)");
  }
  const auto required = [&](const char* key) -> Expected<float> {
    PEREGRINE_ASSIGN_OR_RETURN(auto v, f.optional_float(key));
    if (!v) return corrupt_file(what + ": rope_type " + *type + " needs '" + key + "'");
    return *v;
  };
  if (*type == "longrope") {
    PEREGRINE_RETURN_IF_ERROR(read_longrope(config, f, max_position_embeddings, s));
  } else {
    PEREGRINE_ASSIGN_OR_RETURN(s.factor, required("factor"));
    s.kind = RopeScaling::Kind::kLinear;
  }
  if (*type == "llama3") {
    s.kind = RopeScaling::Kind::kLlama3;
    PEREGRINE_ASSIGN_OR_RETURN(s.low_freq_factor, required("low_freq_factor"));
    PEREGRINE_ASSIGN_OR_RETURN(s.high_freq_factor, required("high_freq_factor"));
    PEREGRINE_ASSIGN_OR_RETURN(s.original_context, f.required_int("original_max_position_embeddings"));
  }
  if (*type == "yarn") PEREGRINE_RETURN_IF_ERROR(read_yarn(f, max_position_embeddings, s));
  if (*type == "dynamic") {
    s.kind = RopeScaling::Kind::kDynamic;
    PEREGRINE_ASSIGN_OR_RETURN(auto inner, f.optional_int("original_max_position_embeddings"));
    PEREGRINE_ASSIGN_OR_RETURN(auto top, config.optional_int("original_max_position_embeddings"));
    s.original_context = inner ? *inner : top.value_or(max_position_embeddings);
  }
  if (const std::string e = rope_scaling_error(s, head_dim); !e.empty()) return corrupt_file(what + ": " + e);
  return s;
}

/// The Mixture-of-Experts fields of config.json: Mixtral's num_local_experts, Qwen2-MoE's and
/// OLMoE's num_experts (absent: a dense model); num_experts_per_tok; moe_intermediate_size
/// (Qwen2-MoE) else intermediate_size; shared_expert_intermediate_size (Qwen2-MoE);
/// norm_topk_prob (else the family's rule). Qwen2-MoE's dense layers (decoder_sparse_step > 1,
/// mlp_only_layers) and OLMoE's clip_qkv are refused.
Status read_experts(const ConfigFields& f, const Architecture& arch, ModelConfig& c) {
  PEREGRINE_ASSIGN_OR_RETURN(auto local, f.optional_int("num_local_experts"));
  PEREGRINE_ASSIGN_OR_RETURN(auto experts, f.optional_int("num_experts"));
  if (!local && !experts) return Status::ok();
  c.n_experts = local ? *local : *experts;
  PEREGRINE_ASSIGN_OR_RETURN(c.n_experts_used, f.required_int("num_experts_per_tok"));
  PEREGRINE_ASSIGN_OR_RETURN(auto moe_ffn, f.optional_int("moe_intermediate_size"));
  c.expert_ffn_dim = moe_ffn.value_or(c.ffn_dim);
  PEREGRINE_ASSIGN_OR_RETURN(auto shared_ffn, f.optional_int("shared_expert_intermediate_size"));
  c.shared_expert_ffn_dim = shared_ffn.value_or(0);
  PEREGRINE_ASSIGN_OR_RETURN(auto norm, f.optional_bool("norm_topk_prob"));
  c.expert_weights_norm = norm.value_or(arch.expert_weights_norm);
  PEREGRINE_ASSIGN_OR_RETURN(auto sparse_step, f.optional_int("decoder_sparse_step"));
  const json* dense_layers = f.get("mlp_only_layers");
  if ((sparse_step && *sparse_step != 1) || (dense_layers && !dense_layers->empty())) {
    return unsupported(f.what() + ": dense layers between the Mixture-of-Experts ones (decoder_sparse_step / mlp_only_layers) are not supported");
  }
  if (const json* clip = f.get("clip_qkv"); clip && !clip->is_null()) return unsupported(f.what() + ": clip_qkv is not supported");
  return Status::ok();
}

/// The gated FFN's activation: hidden_activation (Gemma's field, modeling_gemma2.py), else
/// hidden_act, else the family's. Errors: kUnsupported for other activations.
Expected<FfnActivation> read_activation(const ConfigFields& f, const Architecture& family) {
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    PEREGRINE_ASSIGN_OR_RETURN(auto act, f.optional_string(key));
    if (!act) continue;
    if (*act == "silu") return FfnActivation::kSilu;
    if (*act == "gelu_pytorch_tanh") return FfnActivation::kGeluTanh;
    return unsupported(f.what() + ": " + key + " '" + json_util::printable(*act) +
                       "' is not supported (silu / SwiGLU and gelu_pytorch_tanh / GeGLU are)");
  }
  return family.activation;
}

/// A non-negative number field: `fallback` when absent or null. Errors: kCorruptFile when negative.
template <typename T>
Expected<T> non_negative(const ConfigFields& f, const char* key, T fallback) {
  std::optional<T> v;
  if constexpr (std::is_same_v<T, float>) {
    PEREGRINE_ASSIGN_OR_RETURN(v, f.optional_float(key));
  } else {
    PEREGRINE_ASSIGN_OR_RETURN(v, f.optional_int(key));
  }
  if (v && !(*v >= 0)) return corrupt_file(f.what() + ": field '" + key + "' = " + std::to_string(*v) + " must be >= 0");
  return v.value_or(fallback);
}

/// The fields of formats/config_keys.h (sliding_window, sliding_window_pattern of older Gemma 3
/// configs, Gemma 3's rope_local_base_freq, Gemma 2's soft-caps), each absent or null one the
/// family's default.
Status read_config_keys(const ConfigFields& f, const Architecture& family, ModelConfig& c) {
  const ModelConfig defaults = config_key_defaults(family, ConfigKeyFormat::kHf);
  for (const ConfigKey& k : config_keys()) {
    PEREGRINE_RETURN_IF_ERROR(std::visit(
        [&](auto field) -> Status {
          PEREGRINE_ASSIGN_OR_RETURN(c.*field, non_negative(f, k.hf, defaults.*field));
          return Status::ok();
        },
        k.field));
  }
  return Status::ok();
}

/// The sliding window (read_config_keys: Mistral, Phi-3, Gemma 2: on the family's local layers)
/// unless use_sliding_window is false (Qwen2's configs carry a window they do not use). Qwen2's
/// use_sliding_window true windows the layers from max_window_layers on (modeling_qwen2.py):
/// only all or none of them is supported. A layer_types list (newer transformers) must name the
/// layers the family's pattern makes local. Errors: kUnsupported, kCorruptFile.
Status read_sliding_window(const ConfigFields& f, ModelConfig& c) {
  PEREGRINE_ASSIGN_OR_RETURN(auto use_window, f.optional_bool("use_sliding_window"));
  PEREGRINE_ASSIGN_OR_RETURN(auto max_window_layers, f.optional_int("max_window_layers"));
  if (!use_window.value_or(true)) c.sliding_window = 0;
  if (c.sliding_window > 0 && use_window.value_or(false) && max_window_layers && *max_window_layers != 0) {
    if (*max_window_layers < c.n_layers) {
      return unsupported(f.what() + ": use_sliding_window with max_window_layers " + std::to_string(*max_window_layers) +
                         " < num_hidden_layers (a window on some layers only) is not supported");
    }
    c.sliding_window = 0;  // no layer index reaches max_window_layers
  }
  const json* types = f.get("layer_types");
  if (!types) return Status::ok();
  if (!types->is_array() || static_cast<std::int64_t>(types->size()) != c.n_layers) {
    return corrupt_file(f.what() + ": field 'layer_types' is not a list of num_hidden_layers entries");
  }
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const bool sliding = (*types)[static_cast<std::size_t>(l)] == "sliding_attention";
    if (sliding != (c.layer_window(l) > 0)) {
      return unsupported(f.what() + ": layer_types makes layer " + std::to_string(l) + (sliding ? " local" : " global") +
                         ", not the " + c.arch + " pattern of sliding-window layers");
    }
  }
  return Status::ok();
}

/// Gemma 2 / 3's query_pre_attn_scalar (scores × its ^-0.5) and the family's RMSNorm offset.
Status read_gemma_fields(const ConfigFields& f, const Architecture& family, ModelConfig& c) {
  PEREGRINE_ASSIGN_OR_RETURN(const float scalar, non_negative(f, "query_pre_attn_scalar", 0.0f));
  c.attn_scale = scalar > 0.0f ? 1.0f / std::sqrt(scalar) : 0.0f;
  c.norm_weight_offset = family.hf_norm_offset;
  return Status::ok();
}

Expected<ModelConfig> read_config(const json& j, const std::string& what) {
  if (!j.is_object()) return corrupt_file(what + ": is not a JSON object");
  ConfigFields f(j, what);
  PEREGRINE_ASSIGN_OR_RETURN(const Architecture* arch, read_architecture(f));
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    PEREGRINE_ASSIGN_OR_RETURN(auto has_bias, f.optional_bool(bias));
    if (has_bias && *has_bias) return unsupported(what + ": " + bias + " is true (biases are not supported)");
  }

  ModelConfig c;
  c.arch = std::string(arch->name);  // Mistral is the llama architecture (+ sliding window, handled below)
  PEREGRINE_ASSIGN_OR_RETURN(c.dim, f.required_int("hidden_size"));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_dim, f.required_int("intermediate_size"));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_layers, f.required_int("num_hidden_layers"));
  apply_architecture(c, *arch);
  PEREGRINE_ASSIGN_OR_RETURN(c.activation, read_activation(f, *arch));
  PEREGRINE_RETURN_IF_ERROR(read_gemma_fields(f, *arch, c));
  PEREGRINE_RETURN_IF_ERROR(read_config_keys(f, *arch, c));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_heads, f.required_int("num_attention_heads"));
  PEREGRINE_ASSIGN_OR_RETURN(auto kv_heads, f.optional_int("num_key_value_heads"));
  c.n_kv_heads = kv_heads.value_or(c.n_heads);
  PEREGRINE_ASSIGN_OR_RETURN(auto head_dim, f.optional_int("head_dim"));
  if (head_dim) {
    c.head_dim = *head_dim;
  } else if (c.n_heads > 0) {
    if (c.dim % c.n_heads != 0) {
      return corrupt_file(what + ": hidden_size " + std::to_string(c.dim) +
                          " is not a multiple of num_attention_heads " + std::to_string(c.n_heads) +
                          " (and head_dim is not given)");
    }
    c.head_dim = c.dim / c.n_heads;
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto vocab, f.optional_int("vocab_size"));
  c.vocab_size = vocab.value_or(0);  // 0: taken from embed_tokens below
  PEREGRINE_ASSIGN_OR_RETURN(auto max_pos, f.optional_int("max_position_embeddings"));
  c.max_seq_len = max_pos.value_or(2048);
  PEREGRINE_RETURN_IF_ERROR(read_sliding_window(f, c));
  PEREGRINE_ASSIGN_OR_RETURN(auto eps, f.optional_float("rms_norm_eps"));
  c.rms_eps = eps.value_or(1e-6f);
  PEREGRINE_ASSIGN_OR_RETURN(auto theta, f.optional_float("rope_theta"));
  c.rope_theta = theta.value_or(10000.0f);
  PEREGRINE_ASSIGN_OR_RETURN(c.rope_scaling, read_rope_scaling(f, c.max_seq_len, c.head_dim));
  PEREGRINE_ASSIGN_OR_RETURN(auto tied, f.optional_bool("tie_word_embeddings"));
  c.tied_embeddings = tied.value_or(false);
  PEREGRINE_ASSIGN_OR_RETURN(auto hadamard, f.optional_bool("peregrine_ffn_down_hadamard"));
  c.ffn_down_hadamard = hadamard.value_or(false);
  c.rope_style = RopeStyle::kNeox;
  PEREGRINE_RETURN_IF_ERROR(read_experts(f, *arch, c));
  return c;
}

/// Canonical name of a Hugging Face tensor; nullopt for tensors to skip (the RoPE inv_freq
/// buffer some older checkpoints saved). Errors: kUnsupported for any other name (unknown
/// modules), kCorruptFile for a layer index outside num_hidden_layers or an expert index
/// outside the config's experts.
Expected<std::optional<std::string>> canonical_name(const std::string& hf, const ModelConfig& c, const std::string& what) {
  using R = std::optional<std::string>;
  for (const auto& [from, to] : kHfModelNames) {
    if (hf == from) return R(std::string(to));
  }
  constexpr std::string_view kPrefix = "model.layers.";
  std::string_view rest(hf);
  if (rest.substr(0, kPrefix.size()) == kPrefix) {
    rest.remove_prefix(kPrefix.size());
    std::size_t n = 0;
    std::int64_t layer = 0;
    while (n < rest.size() && n < 9 && rest[n] >= '0' && rest[n] <= '9') {
      layer = layer * 10 + (rest[n] - '0');
      ++n;
    }
    if (n > 0 && n < rest.size() && rest[n] == '.' && (n == 1 || rest[0] != '0')) {
      const std::string_view suffix = rest.substr(n + 1);
      if (suffix == "self_attn.rotary_emb.inv_freq") return R();
      if (const auto to = canonical_layer_name(suffix, find_architecture(c.arch))) {
        if (layer >= c.n_layers) {
          return corrupt_file(what + ": tensor '" + json_util::printable(hf) + "' is for layer " + std::to_string(layer) +
                              " but num_hidden_layers is " + std::to_string(c.n_layers));
        }
        const std::string name = "blk." + std::to_string(layer) + "." + *to;
        if (const auto expert = stacked_expert_name(name); expert && expert->second >= c.n_experts) {
          return corrupt_file(what + ": tensor '" + json_util::printable(hf) + "' is for expert " + std::to_string(expert->second) +
                              " but the config has " + std::to_string(c.n_experts) + " experts");
        }
        return R(name);
      }
    }
  }
  return unsupported(what + ": unexpected tensor '" + json_util::printable(hf) + "' (not part of a " + c.arch + " checkpoint)");
}

/// A file name from the index must name a file inside the folder.
bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

/// HF tensor name → (shard file name, its parsed safetensors), for one file or an index.
struct Weights {
  std::map<std::string, SafetensorsFile> shards;       // file name → parsed shard
  std::map<std::string, const SafetensorsTensor*> by_hf_name;  // HF name → tensor inside a shard
};

Expected<Weights> read_weights(const fs::path& dir) {
  Weights w;
  std::error_code ec;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    PEREGRINE_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single.string()));
    auto& shard = w.shards.emplace("model.safetensors", std::move(f)).first->second;
    for (const auto& t : shard.tensors()) w.by_hf_name.emplace(t.name, &t);
    return w;
  }
  if (!fs::exists(index, ec)) {
    return not_found(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
  const std::string what = index.string();
  PEREGRINE_ASSIGN_OR_RETURN(json j, read_json_file(index.string()));
  const auto map_it = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || map_it == j.end() || !map_it->is_object()) {
    return corrupt_file(what + ": has no \"weight_map\" object");
  }
  for (const auto& [name, shard_name] : map_it->items()) {
    if (!shard_name.is_string() || !is_plain_file_name(shard_name.get_ref<const std::string&>())) {
      return corrupt_file(what + ": weight_map entry '" + json_util::printable(name) +
                          "' is not a file name in the model folder");
    }
    const auto& file = shard_name.get_ref<const std::string&>();
    auto it = w.shards.find(file);
    if (it == w.shards.end()) {
      const fs::path shard_path = dir / file;
      if (!fs::exists(shard_path, ec)) {
        return not_found(what + ": shard '" + json_util::printable(file) + "' (holding '" +
                         json_util::printable(name) + "') does not exist");
      }
      PEREGRINE_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(shard_path.string()));
      it = w.shards.emplace(file, std::move(f)).first;
    }
    const SafetensorsTensor* t = it->second.find(name);
    if (!t) {
      return corrupt_file(what + ": tensor '" + json_util::printable(name) + "' is not in shard '" +
                          json_util::printable(file) + "'");
    }
    w.by_hf_name.emplace(name, t);
  }
  if (w.by_hf_name.empty()) return corrupt_file(what + ": weight_map is empty");
  return w;
}

/// A canonical tensor and the HF tensors it is stored as.
struct HfModule {
  std::string module;  // the HF name without its suffix ("model.layers.0.mlp.down_proj")
  HfParts parts;       // suffix ("weight", "qweight", "scales", …) → tensor
};

/// Suffixes of the quantized layouts' tensors beside (or instead of) "weight".
bool is_quant_suffix(std::string_view s) {
  for (std::string_view q : {"qweight", "qzeros", "scales", "g_idx", "weight_scale"}) {
    if (s == q) return true;
  }
  return false;
}

/// The HF tensors grouped by the canonical tensor they make up.
Expected<std::map<std::string, HfModule>> group_modules(const Weights& w, const ModelConfig& c, const std::string& dir) {
  std::map<std::string, HfModule> modules;
  constexpr std::string_view kWeight = ".weight";
  for (const auto& [hf_name, tensor] : w.by_hf_name) {
    const std::size_t dot = hf_name.rfind('.');
    const std::string suffix = dot == std::string::npos ? "" : hf_name.substr(dot + 1);
    const bool quant = is_quant_suffix(suffix);
    const std::string module = quant || suffix == "weight" ? hf_name.substr(0, dot) : hf_name;
    PEREGRINE_ASSIGN_OR_RETURN(auto name, canonical_name(quant ? module + std::string(kWeight) : hf_name, c, dir));
    if (!name) continue;
    HfModule& m = modules[*name];
    m.module = module;
    m.parts[quant ? suffix : "weight"] = tensor;
  }
  return modules;
}

/// vocab_size from the rows of the (float) embedding when config.json does not give it.
Status resolve_vocab(ModelConfig& c, const std::map<std::string, HfModule>& modules, const std::string& what) {
  if (c.vocab_size != 0) return Status::ok();
  const SafetensorsTensor* embedding = nullptr;
  if (const auto it = modules.find("token_embd.weight"); it != modules.end()) {
    const auto weight = it->second.parts.find("weight");
    if (weight != it->second.parts.end()) embedding = weight->second;
  }
  if (!embedding || embedding->shape.size() != 2) {
    return corrupt_file(what + ": field 'vocab_size' is missing and model.embed_tokens.weight is absent or not 2-D");
  }
  c.vocab_size = embedding->shape[0];
  return Status::ok();
}

}  // namespace

Expected<ModelFile> load_hf_model(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::exists(dir, ec)) return invalid_argument(dir + " is not a directory (expected a Hugging Face model folder)");
    return not_found("no such directory: " + dir);
  }
  const fs::path config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path, ec)) {
    return not_found(dir + ": no config.json (not a Hugging Face model folder)");
  }
  ModelFile m;
  m.format = ModelFormat::kHuggingFace;
  m.path = dir;
  PEREGRINE_ASSIGN_OR_RETURN(json cfg, read_json_file(config_path.string()));
  PEREGRINE_ASSIGN_OR_RETURN(m.config, read_config(cfg, config_path.string()));
  PEREGRINE_ASSIGN_OR_RETURN(const HfQuantConfig quant, read_hf_quant_config(cfg, dir));
  PEREGRINE_ASSIGN_OR_RETURN(Weights w, read_weights(fs::path(dir)));
  PEREGRINE_ASSIGN_OR_RETURN(auto modules, group_modules(w, m.config, dir));
  // tie_word_embeddings, or no lm_head saved at all: the LM head is token_embd.
  if (m.config.tied_embeddings || !modules.count("output.weight")) {
    m.config.tied_embeddings = true;
    modules.erase("output.weight");
  }
  PEREGRINE_RETURN_IF_ERROR(resolve_vocab(m.config, modules, config_path.string()));
  // Sane dimensions before any quantized tensor is decoded against them.
  if (Status st = m.config.validate(); !st) return Status(st.code(), dir + ": " + st.message());
  for (const auto& [name, module] : modules) {
    const auto shape = llama_tensor_shape(m.config, name).value_or(std::vector<std::int64_t>{});
    auto t = decode_hf_tensor(module.module, module.parts, quant, name, shape);
    if (!t) return Status(t.status().code(), dir + ": " + t.status().message());
    if (t->bytes) m.storage.push_back(t->bytes);
    // A Linear(dim, 1) weight [1, dim] (Qwen2-MoE's shared_expert_gate) is the vector [dim].
    if (shape.size() == 1 && t->view.shape.size() == 2 && t->view.shape[0] == 1) t->view.shape = {t->view.shape[1]};
    m.tensors.emplace(name, std::move(t->view));
  }
  for (const auto& [file, shard] : w.shards) m.storage.push_back(shard.file());
  PEREGRINE_RETURN_IF_ERROR(split_fused_projections(m));
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(m));
  return m;
}

}  // namespace peregrine

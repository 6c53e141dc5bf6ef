#include "peregrine/formats/gguf/gguf_model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>

#include "peregrine/formats/config_keys.h"
#include "formats/fused_projections.h"
#include "peregrine/core/json_util.h"

namespace peregrine {
namespace {

Expected<std::int64_t> required_int(const GgufFile& g, const std::string& key, const std::string& path) {
  auto v = g.get_int(key);
  if (!v) return corrupt_file(path + ": " + v.status().message() + " (required hyper-parameter)");
  return *v;
}

/// An optional integer key: nullopt when absent, kCorruptFile when present with a wrong type.
Expected<std::optional<std::int64_t>> optional_int(const GgufFile& g, const std::string& key,
                                                   const std::string& path) {
  if (!g.find(key)) return std::optional<std::int64_t>();
  auto v = g.get_int(key);
  if (!v) return corrupt_file(path + ": " + v.status().message());
  return std::optional<std::int64_t>(*v);
}

/// An optional float key, which must also fit in a float.
Expected<std::optional<float>> optional_float(const GgufFile& g, const std::string& key,
                                              const std::string& path) {
  if (!g.find(key)) return std::optional<float>();
  auto v = g.get_float(key);
  if (!v) return corrupt_file(path + ": " + v.status().message());
  if (!std::isfinite(*v) || std::fabs(*v) > std::numeric_limits<float>::max()) {
    return corrupt_file(path + ": GGUF key '" + key + "' = " + std::to_string(*v) + " is out of range");
  }
  return std::optional<float>(static_cast<float>(*v));
}

/// An optional bool key: false when absent, kCorruptFile when present with another type.
Expected<bool> optional_bool(const GgufFile& g, const std::string& key, const std::string& path) {
  const GgufValue* v = g.find(key);
  if (!v) return false;
  const bool* b = std::get_if<bool>(&v->scalar);
  if (v->type != GgufType::kBool || !b) return corrupt_file(path + ": GGUF key '" + key + "' is not a bool");
  return *b;
}

/// {arch}.rope.scaling.type / .factor (llama.cpp's llm_kv ROPE_SCALING_*): none, linear, or
/// yarn with .original_context_length (else `context_length`), .yarn_beta_fast / .yarn_beta_slow
/// (llama.cpp's defaults 32 / 1) and .attn_factor (× YaRN's 0.1·ln(factor) + 1, as llama.cpp's
/// rope kernel applies it); longrope is only marked here (read_longrope reads it); the other
/// types are refused by name. Llama 3.1's factors come as the rope_freqs.weight tensor.
Expected<RopeScaling> read_rope_scaling(const GgufFile& g, const std::string& arch, std::int64_t context,
                                        const std::string& path) {
  RopeScaling s;
  const auto key = [&](const char* k) { return arch + ".rope.scaling." + k; };
  if (!g.find(key("type"))) return s;
  auto type = g.get_string(key("type"));
  if (!type) return corrupt_file(path + ": " + type.status().message());
  if (*type == "none") return s;
  if (*type == "longrope") {
    s.kind = RopeScaling::Kind::kLongRope;
    return s;
  }
  if (*type != "linear" && *type != "yarn") {
    return unsupported(path + ": GGUF " + key("type") + " '" + json_util::printable(*type) +
                       "' is not supported (none, linear, yarn and longrope are; Llama 3.1's factors come as rope_freqs.weight)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto factor, optional_float(g, key("factor"), path));
  if (!factor) return corrupt_file(path + ": GGUF " + key("type") + " is " + *type + " but " + key("factor") + " is missing");
  s.kind = *type == "linear" ? RopeScaling::Kind::kLinear : RopeScaling::Kind::kYarn;
  s.factor = *factor;
  if (s.kind == RopeScaling::Kind::kLinear) return s;
  PEREGRINE_ASSIGN_OR_RETURN(auto original, optional_int(g, key("original_context_length"), path));
  s.original_context = original.value_or(context);
  PEREGRINE_ASSIGN_OR_RETURN(auto fast, optional_float(g, key("yarn_beta_fast"), path));
  PEREGRINE_ASSIGN_OR_RETURN(auto slow, optional_float(g, key("yarn_beta_slow"), path));
  PEREGRINE_ASSIGN_OR_RETURN(auto attn, optional_float(g, key("attn_factor"), path));
  s.beta_fast = fast.value_or(32.0f);
  s.beta_slow = slow.value_or(1.0f);
  if (attn && *attn != 1.0f) s.attention_factor = *attn * rope_attention_factor(s);
  return s;
}

/// One of LongRoPE's factor tensors, f32 [head_dim / 2] (as convert_hf_to_gguf.py writes it),
/// moved out of m.tensors. Errors: kCorruptFile (missing, another shape), kUnsupported (another
/// dtype).
Expected<std::vector<float>> take_rope_factors(ModelFile& m, const std::string& name) {
  const TensorView* t = m.find(name);
  if (!t) return corrupt_file(m.path + ": tensor '" + name + "' is missing (LongRoPE needs rope_factors_long and rope_factors_short)");
  if (t->dtype != DType::kF32) {
    return unsupported(m.path + ": tensor '" + name + "' is " + std::string(dtype_name(t->dtype)) + ", expected f32 (LongRoPE factors)");
  }
  if (t->shape != std::vector<std::int64_t>{m.config.head_dim / 2}) {
    return corrupt_file(m.path + ": tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                        std::to_string(m.config.head_dim / 2) + "] (head_dim / 2 LongRoPE factors)");
  }
  std::vector<float> out(static_cast<std::size_t>(t->numel()));
  std::memcpy(out.data(), t->data, out.size() * sizeof(float));
  m.tensors.erase(name);
  return out;
}

/// LongRoPE as llama.cpp's Phi-3 GGUFs hold it (convert_hf_to_gguf.py Phi3MiniModel; read by
/// llama-model.cpp): the rope_factors_long.weight / rope_factors_short.weight tensors (moved into
/// m.config.rope_scaling), {arch}.rope.scaling.original_context_length (else context_length),
/// .attn_factor (cos and sin multiplied by it, as llama.cpp's rope kernel does; absent: 1, its
/// hparams default), factor = context_length / original context, as HF derives it for Phi-3.
/// Without the tensors nothing changes, unless {arch}.rope.scaling.type said longrope.
/// Errors: kCorruptFile (a missing or misshapen factor tensor, the tensors beside another
/// scaling type), kUnsupported (a factor tensor not f32); optional_int / optional_float's.
Status read_longrope(const GgufFile& g, ModelFile& m) {
  RopeScaling& s = m.config.rope_scaling;
  const auto key = [&](const char* k) { return m.config.arch + ".rope.scaling." + k; };
  const bool tensors = m.find("rope_factors_long.weight") || m.find("rope_factors_short.weight");
  if (!tensors && s.kind != RopeScaling::Kind::kLongRope) return Status::ok();
  if (s.kind != RopeScaling::Kind::kNone && s.kind != RopeScaling::Kind::kLongRope) {
    return corrupt_file(m.path + ": GGUF " + key("type") + " is " + rope_scaling_name(s.kind) +
                        " but the file also holds LongRoPE's rope_factors tensors");
  }
  s.kind = RopeScaling::Kind::kLongRope;
  PEREGRINE_ASSIGN_OR_RETURN(s.long_factor, take_rope_factors(m, "rope_factors_long.weight"));
  PEREGRINE_ASSIGN_OR_RETURN(s.short_factor, take_rope_factors(m, "rope_factors_short.weight"));
  PEREGRINE_ASSIGN_OR_RETURN(auto original, optional_int(g, key("original_context_length"), m.path));
  s.original_context = original.value_or(m.config.max_seq_len);
  if (s.original_context > 0) s.factor = static_cast<float>(static_cast<double>(m.config.max_seq_len) / static_cast<double>(s.original_context));
  PEREGRINE_ASSIGN_OR_RETURN(auto attn, optional_float(g, key("attn_factor"), m.path));
  const float attention = attn.value_or(1.0f);  // llama.cpp's hparams default
  if (attention != rope_attention_factor(s)) s.attention_factor = attention;
  return Status::ok();
}

/// The Mixture-of-Experts keys of llama.cpp (LLM_KV_EXPERT_*): expert_count (absent or 0: a
/// dense model), expert_used_count, expert_feed_forward_length (else feed_forward_length, as
/// Mixtral's and OLMoE's files leave it), expert_shared_feed_forward_length (Qwen2-MoE),
/// expert_weights_norm (else the family's rule).
Status read_experts(const GgufFile& g, const Architecture& arch, ModelConfig& c, const std::string& path) {
  const std::string a(arch.name);
  const auto key = [&](const char* k) { return a + "." + k; };
  PEREGRINE_ASSIGN_OR_RETURN(auto n_experts, optional_int(g, key("expert_count"), path));
  if (!n_experts || *n_experts == 0) return Status::ok();
  c.n_experts = *n_experts;
  PEREGRINE_ASSIGN_OR_RETURN(c.n_experts_used, required_int(g, key("expert_used_count"), path));
  PEREGRINE_ASSIGN_OR_RETURN(auto expert_ffn, optional_int(g, key("expert_feed_forward_length"), path));
  c.expert_ffn_dim = expert_ffn.value_or(c.ffn_dim);
  PEREGRINE_ASSIGN_OR_RETURN(auto shared_ffn, optional_int(g, key("expert_shared_feed_forward_length"), path));
  c.shared_expert_ffn_dim = shared_ffn.value_or(0);
  c.expert_weights_norm = arch.expert_weights_norm;
  if (g.find(key("expert_weights_norm"))) {
    PEREGRINE_ASSIGN_OR_RETURN(c.expert_weights_norm, optional_bool(g, key("expert_weights_norm"), path));
  }
  return Status::ok();
}

/// A non-negative number key: `fallback` when absent; kCorruptFile naming the key when negative
/// (or, through optional_float, not finite).
template <typename T>
Expected<T> read_non_negative(const GgufFile& g, const std::string& key, T fallback, const std::string& path) {
  std::optional<T> v;
  if constexpr (std::is_same_v<T, float>) {
    PEREGRINE_ASSIGN_OR_RETURN(v, optional_float(g, key, path));
  } else {
    PEREGRINE_ASSIGN_OR_RETURN(v, optional_int(g, key, path));
  }
  if (v && *v < 0) return corrupt_file(path + ": GGUF key '" + key + "' = " + std::to_string(*v) + " must be >= 0");
  return v.value_or(fallback);
}

/// The family's fields (apply_architecture), the keys of formats/config_keys.h (sliding window
/// and its pattern as a scalar period, the local layers' RoPE base, the soft-caps, each absent
/// one the family's default: llama.cpp's hparams for gemma2 / gemma3) and
/// {arch}.attention.scale (llama-arch.cpp LLM_KV_ATTENTION_SCALE): without it a Gemma 2 file of
/// gguf_scale_dim_layers layers scales scores by (dim / n_heads)^-0.5 as llama.cpp does.
/// Needs c.dim, c.n_layers, c.n_heads.
Status read_attention_variant(const GgufFile& g, const Architecture& arch, const std::string& path, ModelConfig& c) {
  const std::string a(arch.name);
  apply_architecture(c, arch);
  const ModelConfig defaults = config_key_defaults(arch, ConfigKeyFormat::kGguf);
  for (const ConfigKey& k : config_keys()) {
    PEREGRINE_RETURN_IF_ERROR(std::visit(
        [&](auto field) -> Status {
          PEREGRINE_ASSIGN_OR_RETURN(c.*field, read_non_negative(g, a + "." + k.gguf, defaults.*field, path));
          return Status::ok();
        },
        k.field));
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto scale, read_non_negative(g, a + ".attention.scale", 0.0f, path));
  if (scale == 0.0f && arch.gguf_scale_dim_layers > 0 && c.n_layers == arch.gguf_scale_dim_layers && c.n_heads > 0) {
    scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
  }
  c.attn_scale = scale;
  return Status::ok();
}

/// The config from the `{arch}.*` keys llama.cpp writes for every family (llama-arch.cpp
/// LLM_KV_*): head_dim is {arch}.attention.key_length when given (Qwen3: not dim / n_heads),
/// the Q/K row order the family's GGUF rope type.
Expected<ModelConfig> read_config(const GgufFile& g, const Architecture& arch, const std::string& path) {
  const std::string a(arch.name);
  const auto key = [&](const char* k) { return a + "." + k; };
  ModelConfig c;
  c.arch = a;
  PEREGRINE_ASSIGN_OR_RETURN(c.dim, required_int(g, key("embedding_length"), path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_layers, required_int(g, key("block_count"), path));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_dim, required_int(g, key("feed_forward_length"), path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_heads, required_int(g, key("attention.head_count"), path));
  PEREGRINE_ASSIGN_OR_RETURN(c.max_seq_len, required_int(g, key("context_length"), path));
  PEREGRINE_ASSIGN_OR_RETURN(auto kv, optional_int(g, key("attention.head_count_kv"), path));
  c.n_kv_heads = kv.value_or(c.n_heads);
  PEREGRINE_ASSIGN_OR_RETURN(auto key_length, optional_int(g, key("attention.key_length"), path));
  PEREGRINE_ASSIGN_OR_RETURN(auto value_length, optional_int(g, key("attention.value_length"), path));
  if (key_length) {
    if (value_length && *value_length != *key_length) {
      return unsupported(path + ": GGUF " + key("attention.value_length") + " " + std::to_string(*value_length) + " != " +
                         key("attention.key_length") + " " + std::to_string(*key_length) + " (V heads wider than K heads)");
    }
    c.head_dim = *key_length;
  } else {
    if (c.n_heads <= 0 || c.dim % c.n_heads != 0) {
      return corrupt_file("GGUF " + key("embedding_length") + " " + std::to_string(c.dim) +
                          " is not a positive multiple of " + key("attention.head_count") + " " + std::to_string(c.n_heads));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto rot, optional_int(g, key("rope.dimension_count"), path));
  if (rot && *rot != c.head_dim) {
    return unsupported(path + ": GGUF " + key("rope.dimension_count") + " " + std::to_string(*rot) +
                       " != head_dim " + std::to_string(c.head_dim) + " (partial RoPE)");
  }
  PEREGRINE_RETURN_IF_ERROR(read_attention_variant(g, arch, path, c));
  PEREGRINE_ASSIGN_OR_RETURN(auto eps, optional_float(g, key("attention.layer_norm_rms_epsilon"), path));
  if (eps) c.rms_eps = *eps;
  PEREGRINE_ASSIGN_OR_RETURN(auto theta, optional_float(g, key("rope.freq_base"), path));
  if (theta) c.rope_theta = *theta;
  PEREGRINE_ASSIGN_OR_RETURN(c.rope_scaling, read_rope_scaling(g, a, c.max_seq_len, path));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_down_hadamard, optional_bool(g, "peregrine.ffn_down_hadamard", path));
  c.rope_style = arch.gguf_rope_style;
  PEREGRINE_RETURN_IF_ERROR(read_experts(g, arch, c, path));
  return c;
}

}  // namespace

Expected<ModelFile> gguf_to_model_file(GgufFile g, const std::string& path) {
  auto arch = g.get_string("general.architecture");
  if (!arch) return corrupt_file(path + ": " + arch.status().message());
  const Architecture* family = find_architecture(*arch);
  if (!family) {
    return unsupported(path + ": architecture '" + json_util::printable(*arch) + "' is not supported (" +
                       supported_architecture_names() + " are)");
  }
  ModelFile m;
  m.format = ModelFormat::kGguf;
  m.path = path;
  PEREGRINE_ASSIGN_OR_RETURN(m.config, read_config(g, *family, path));
  for (const auto& t : g.tensors()) m.tensors.emplace(t.name, t);
  PEREGRINE_RETURN_IF_ERROR(read_longrope(g, m));
  if (family->fused_gate_up) name_gguf_fused_gate_up(m);  // llama.cpp's Phi-3 ffn_up holds gate and up rows
  PEREGRINE_RETURN_IF_ERROR(split_fused_projections(m));
  PEREGRINE_RETURN_IF_ERROR(split_expert_tensors(m));
  if (const TensorView* emb = m.find("token_embd.weight"); emb && emb->shape.size() == 2) {
    m.config.vocab_size = emb->shape[0];
  }
  m.config.tied_embeddings = m.find("output.weight") == nullptr;
  if (g.file()) m.storage.push_back(g.file());
  m.gguf = std::move(g);
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(m));
  return m;
}

Expected<ModelFile> load_gguf_model(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
  return gguf_to_model_file(std::move(g), path);
}

}  // namespace peregrine

#include "peregrine/formats/gguf_model.h"

#include <cmath>
#include <limits>
#include <optional>

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

/// llama.rope.scaling.type / .factor (llama.cpp's llm_kv ROPE_SCALING_*): none or linear; the
/// other types are refused by name. Llama 3.1's factors come as the rope_freqs.weight tensor.
Expected<RopeScaling> read_rope_scaling(const GgufFile& g, const std::string& path) {
  RopeScaling s;
  if (!g.find("llama.rope.scaling.type")) return s;
  auto type = g.get_string("llama.rope.scaling.type");
  if (!type) return corrupt_file(path + ": " + type.status().message());
  if (*type == "none") return s;
  if (*type != "linear") {
    return unsupported(path + ": GGUF llama.rope.scaling.type '" + json_util::printable(*type) +
                       "' is not supported (none and linear are; Llama 3.1's factors come as rope_freqs.weight)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto factor, optional_float(g, "llama.rope.scaling.factor", path));
  if (!factor) return corrupt_file(path + ": GGUF llama.rope.scaling.type is linear but llama.rope.scaling.factor is missing");
  s.kind = RopeScaling::Kind::kLinear;
  s.factor = *factor;
  return s;
}

Expected<ModelConfig> read_llama_config(const GgufFile& g, const std::string& path) {
  ModelConfig c;
  PEREGRINE_ASSIGN_OR_RETURN(c.dim, required_int(g, "llama.embedding_length", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_layers, required_int(g, "llama.block_count", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_dim, required_int(g, "llama.feed_forward_length", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.n_heads, required_int(g, "llama.attention.head_count", path));
  PEREGRINE_ASSIGN_OR_RETURN(c.max_seq_len, required_int(g, "llama.context_length", path));
  PEREGRINE_ASSIGN_OR_RETURN(auto kv, optional_int(g, "llama.attention.head_count_kv", path));
  c.n_kv_heads = kv.value_or(c.n_heads);
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0) {
    return corrupt_file("GGUF llama.embedding_length " + std::to_string(c.dim) +
                        " is not a positive multiple of llama.attention.head_count " + std::to_string(c.n_heads));
  }
  c.head_dim = c.dim / c.n_heads;
  PEREGRINE_ASSIGN_OR_RETURN(auto rot, optional_int(g, "llama.rope.dimension_count", path));
  if (rot && *rot != c.head_dim) {
    return unsupported(path + ": GGUF llama.rope.dimension_count " + std::to_string(*rot) +
                       " != head_dim " + std::to_string(c.head_dim) + " (partial RoPE)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto eps, optional_float(g, "llama.attention.layer_norm_rms_epsilon", path));
  if (eps) c.rms_eps = *eps;
  PEREGRINE_ASSIGN_OR_RETURN(auto theta, optional_float(g, "llama.rope.freq_base", path));
  if (theta) c.rope_theta = *theta;
  PEREGRINE_ASSIGN_OR_RETURN(c.rope_scaling, read_rope_scaling(g, path));
  PEREGRINE_ASSIGN_OR_RETURN(c.ffn_down_hadamard, optional_bool(g, "peregrine.ffn_down_hadamard", path));
  c.rope_style = RopeStyle::kInterleaved;
  return c;
}

}  // namespace

Expected<ModelFile> gguf_to_model_file(GgufFile g, const std::string& path) {
  auto arch = g.get_string("general.architecture");
  if (!arch) return corrupt_file(path + ": " + arch.status().message());
  if (*arch != "llama") {
    return unsupported(path + ": architecture '" + json_util::printable(*arch) +
                       "' is not supported (only llama)");
  }
  ModelFile m;
  m.format = ModelFormat::kGguf;
  m.path = path;
  PEREGRINE_ASSIGN_OR_RETURN(m.config, read_llama_config(g, path));
  for (const auto& t : g.tensors()) m.tensors.emplace(t.name, t);
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

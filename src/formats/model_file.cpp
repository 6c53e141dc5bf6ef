#include "peregrine/formats/model_file.h"

#include <filesystem>
#include <utility>

#include "peregrine/formats/gguf/gguf_model.h"
#include "peregrine/formats/hf/hf_model.h"
#include "peregrine/formats/llama2c.h"

namespace peregrine {
namespace {

// The dtype can hold the tensor's rows and nbytes matches them.
Status expect_layout(const std::string& path, const TensorView& t) {
  if (t.dtype == DType::kI8) return unsupported(path + ": tensor '" + t.name + "' is i8, a KV-cache format");
  if (t.dtype == DType::kInt && !t.quant.valid()) {
    return corrupt_file(path + ": tensor '" + t.name + "' has invalid int quantization parameters (bits " +
                        std::to_string(t.quant.bits) + ", group " + std::to_string(t.quant.group_size) + ")");
  }
  const auto rb = t.row_bytes();
  if (!rb || *rb * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
    return corrupt_file(path + ": tensor '" + t.name + "' " + t.shape_string() + " of " + std::string(dtype_name(t.dtype)) +
                        " does not match its " + std::to_string(t.nbytes) + " bytes");
  }
  return Status::ok();
}

Status expect_tensor(const ModelFile& m, const std::string& name) {
  const TensorView* t = m.find(name);
  if (!t) return corrupt_file(m.path + ": tensor '" + name + "' is missing");
  TensorView want;
  want.shape = *llama_tensor_shape(m.config, name);
  if (t->shape != want.shape) {
    return corrupt_file(m.path + ": tensor '" + name + "' has shape " + t->shape_string() +
                        ", expected " + want.shape_string());
  }
  return expect_layout(m.path, *t);
}

Status expect_vector(const ModelFile& m, const std::string& name) {
  PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, name));
  const DType t = m.find(name)->dtype;
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
    return unsupported(m.path + ": 1-D tensor '" + name + "' is " + std::string(dtype_name(t)) + ", not f32/f16/bf16");
  }
  return Status::ok();
}

/// Vector tensor `name`: required when `own`, else refused ("not part of a <arch> model").
Status expect_family_vector(const ModelFile& m, const std::string& name, bool own) {
  if (own) return expect_vector(m, name);
  if (m.find(name)) return unsupported(m.path + ": tensor '" + name + "' is not part of a " + m.config.arch + " model");
  return Status::ok();
}

/// Layer l's dense SwiGLU FFN, and no expert tensors.
Status validate_dense_ffn(const ModelFile& m, std::int64_t l) {
  for (const char* name : {"ffn_gate", "ffn_up", "ffn_down"}) PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, layer_tensor_name(l, name)));
  for (const char* name : {"ffn_gate_inp", "ffn_gate_shexp", "ffn_gate_inp_shexp"}) {
    if (m.find(layer_tensor_name(l, name))) {
      return corrupt_file(m.path + ": tensor '" + layer_tensor_name(l, name) + "' belongs to a Mixture-of-Experts layer, but the " +
                          "config has no experts (expert_count)");
    }
  }
  return Status::ok();
}

/// Layer l's router, every expert's gate/up/down (no dense FFN) and the shared expert when
/// the config has one.
Status validate_experts(const ModelFile& m, std::int64_t l) {
  const ModelConfig& c = m.config;
  PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, layer_tensor_name(l, "ffn_gate_inp")));
  for (std::int64_t e = 0; e < c.n_experts; ++e) {
    for (const char* proj : {"ffn_gate", "ffn_up", "ffn_down"}) PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, expert_tensor_name(l, proj, e)));
  }
  const bool shared = c.shared_expert_ffn_dim > 0;
  for (const char* name : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"}) {
    if (shared) PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, layer_tensor_name(l, name)));
  }
  PEREGRINE_RETURN_IF_ERROR(expect_family_vector(m, layer_tensor_name(l, "ffn_gate_inp_shexp"), shared));
  for (const char* name : {"ffn_gate", "ffn_up", "ffn_down"}) {
    if (m.find(layer_tensor_name(l, name))) {
      return corrupt_file(m.path + ": tensor '" + layer_tensor_name(l, name) + "' is a dense FFN in a Mixture-of-Experts layer");
    }
  }
  return Status::ok();
}


/// A decimal index of 1..9 digits without leading zeros ("0", "17"), or nullopt.
std::optional<std::int64_t> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

/// The layer index of "blk.<L>.<rest>" (rest stored in *rest), or nullopt for other names.
std::optional<std::int64_t> layer_of(std::string_view name, std::string_view* rest) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot + 1 >= name.size()) return std::nullopt;
  const auto layer = parse_index(name.substr(0, dot));
  if (layer) *rest = name.substr(dot + 1);
  return layer;
}

}  // namespace

const char* model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::kLlama2c: return "llama2.c";
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHuggingFace: return "hf";
  }
  return "?";
}

bool is_norm_weight(std::string_view name) { return name.ends_with("norm.weight"); }

const TensorView* ModelFile::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

std::size_t ModelFile::weight_bytes() const {
  std::size_t n = 0;
  for (const auto& [name, t] : tensors) n += t.nbytes;
  return n;
}

std::optional<std::vector<std::int64_t>> llama_tensor_shape(const ModelConfig& c, std::string_view name) {
  using Shape = std::vector<std::int64_t>;
  const std::int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  if (name == "token_embd.weight" || name == "output.weight") return Shape{c.vocab_size, c.dim};
  if (name == "output_norm.weight") return Shape{c.dim};
  if (name == "rope_freqs.weight") return Shape{c.head_dim / 2};
  std::string_view rest;
  const auto layer = layer_of(name, &rest);
  if (!layer || *layer >= c.n_layers) return std::nullopt;
  const Architecture* arch = find_architecture(c.arch);
  const bool whole_qk_norm = arch && arch->qk_norm == QkNorm::kWhole;
  const std::int64_t eff = c.expert_ffn_dim, sff = c.shared_expert_ffn_dim;
  const std::pair<std::string_view, Shape> per_layer[] = {
      {"attn_norm.weight", {c.dim}},           {"ffn_norm.weight", {c.dim}},
      {"attn_q.weight", {q_dim, c.dim}},       {"attn_k.weight", {kv_dim, c.dim}},
      {"attn_v.weight", {kv_dim, c.dim}},      {"attn_output.weight", {c.dim, q_dim}},
      {"ffn_gate.weight", {c.ffn_dim, c.dim}}, {"ffn_up.weight", {c.ffn_dim, c.dim}},
      {"ffn_down.weight", {c.dim, c.ffn_dim}}, {"attn_q.bias", {q_dim}},
      {"attn_k.bias", {kv_dim}},               {"attn_v.bias", {kv_dim}},
      {"attn_q_norm.weight", {whole_qk_norm ? q_dim : c.head_dim}},
      {"attn_k_norm.weight", {whole_qk_norm ? kv_dim : c.head_dim}},
      {"attn_qkv.weight", {q_dim + 2 * kv_dim, c.dim}}, {"ffn_gate_up.weight", {2 * c.ffn_dim, c.dim}},
      {"ffn_gate_inp.weight", {c.n_experts, c.dim}},
      {"ffn_gate_exps.weight", {c.n_experts, eff, c.dim}}, {"ffn_up_exps.weight", {c.n_experts, eff, c.dim}},
      {"ffn_down_exps.weight", {c.n_experts, c.dim, eff}},
      {"ffn_gate_shexp.weight", {sff, c.dim}}, {"ffn_up_shexp.weight", {sff, c.dim}},
      {"ffn_down_shexp.weight", {c.dim, sff}}, {"ffn_gate_inp_shexp.weight", {c.dim}},
      {"post_attention_norm.weight", {c.dim}}, {"post_ffw_norm.weight", {c.dim}}};
  for (const auto& [suffix, shape] : per_layer) {
    if (rest == suffix) return shape;
  }
  // One expert: "ffn_gate.E.weight", "ffn_up.E.weight", "ffn_down.E.weight".
  for (const auto& [proj, shape] : {std::pair{std::string_view("ffn_gate."), Shape{eff, c.dim}},
                                    std::pair{std::string_view("ffn_up."), Shape{eff, c.dim}},
                                    std::pair{std::string_view("ffn_down."), Shape{c.dim, eff}}}) {
    if (!rest.starts_with(proj) || !rest.ends_with(".weight")) continue;
    const std::string_view index = rest.substr(proj.size(), rest.size() - proj.size() - std::string_view(".weight").size());
    const auto expert = parse_index(index);
    if (expert && *expert < c.n_experts) return shape;
  }
  return std::nullopt;
}

std::string expert_tensor_name(std::int64_t layer, std::string_view proj, std::int64_t expert) {
  return "blk." + std::to_string(layer) + "." + std::string(proj) + "." + std::to_string(expert) + ".weight";
}

std::string layer_tensor_name(std::int64_t layer, std::string_view name) {
  return "blk." + std::to_string(layer) + "." + std::string(name) + ".weight";
}

Status validate_llama_tensors(const ModelFile& m) {
  const ModelConfig& c = m.config;
  if (Status st = c.validate(); !st) return {st.code(), m.path + ": " + st.message()};
  PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, "token_embd.weight"));
  PEREGRINE_RETURN_IF_ERROR(expect_vector(m, "output_norm.weight"));
  if (!c.tied_embeddings) PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, "output.weight"));
  if (m.find("rope_freqs.weight")) {
    PEREGRINE_RETURN_IF_ERROR(expect_vector(m, "rope_freqs.weight"));
    if (c.rope_scaling.kind != RopeScaling::Kind::kNone) {
      return corrupt_file(m.path + ": both a rope_freqs.weight tensor and rope scaling '" +
                          rope_scaling_name(c.rope_scaling.kind) + "' in the metadata (one set of RoPE factors expected)");
    }
  }
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    PEREGRINE_RETURN_IF_ERROR(expect_vector(m, layer_tensor_name(l, "attn_norm")));
    PEREGRINE_RETURN_IF_ERROR(expect_vector(m, layer_tensor_name(l, "ffn_norm")));
    for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      PEREGRINE_RETURN_IF_ERROR(expect_tensor(m, layer_tensor_name(l, name)));
    }
    const LayerSpec spec = c.layer_spec(l);
    PEREGRINE_RETURN_IF_ERROR(spec.moe ? validate_experts(m, l) : validate_dense_ffn(m, l));
    // The extra tensors of the layer's spec: required where it has them, refused elsewhere.
    const bool qk_norm = spec.qk_norm != QkNorm::kNone;
    for (const auto& [name, own] : {std::pair{"attn_q.bias", spec.qkv_bias}, std::pair{"attn_k.bias", spec.qkv_bias},
                                    std::pair{"attn_v.bias", spec.qkv_bias}, std::pair{"attn_q_norm.weight", qk_norm},
                                    std::pair{"attn_k_norm.weight", qk_norm},
                                    std::pair{"post_attention_norm.weight", spec.post_norms},
                                    std::pair{"post_ffw_norm.weight", spec.post_norms}}) {
      PEREGRINE_RETURN_IF_ERROR(expect_family_vector(m, "blk." + std::to_string(l) + "." + name, own));
    }
  }
  return Status::ok();
}

Expected<ModelFile> load_model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::exists(std::filesystem::path(path) / "config.json", ec)) {
      return invalid_argument(path + " is a directory without config.json (expected a .gguf, a llama2.c .bin, or a Hugging Face model folder)");
    }
    return load_hf_model(path);
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));  // missing/empty/dir errors
  const auto bytes = file->bytes();
  const std::string ext = std::filesystem::path(path).extension().string();
  const bool gguf_magic =
      bytes.size() >= 4 && std::string_view(reinterpret_cast<const char*>(bytes.data()), 4) == "GGUF";
  // A .gguf name goes to the GGUF reader even without the magic: it tells truncation from a
  // wrong magic.
  if (gguf_magic || ext == ".gguf") return load_gguf_model(path);
  if (ext == ".bin") return load_llama2c_model(path);
  if (ext == ".safetensors") {
    const auto dir = std::filesystem::path(path).parent_path();
    return load_hf_model(dir.empty() ? std::string(".") : dir.string());
  }
  return unsupported(path + ": unknown model format (expected a .gguf, a llama2.c .bin, or a Hugging Face folder)");
}

}  // namespace peregrine

// save_gguf_model (model_writer.h): a ModelFile as a llama-architecture GGUF v3 file.
#include <filesystem>
#include <map>

#include "formats/fused_projections.h"
#include "formats/owned_tensor.h"
#include "formats/rope_rows.h"
#include "peregrine/formats/gguf/gguf_llama_metadata.h"
#include "peregrine/formats/gguf/gguf_writer.h"
#include "peregrine/formats/model_writer.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

/// general.file_type's dtype: the most common dtype of the matrices (F32 without any).
DType main_matrix_dtype(const ModelFile& m) {
  std::map<DType, int> count;
  for (const auto& [name, t] : m.tensors) {
    if (t.shape.size() == 2) ++count[t.dtype];
  }
  DType best = DType::kF32;
  int best_count = 0;
  for (const auto& [dtype, n] : count) {
    if (n > best_count) best = dtype, best_count = n;
  }
  return best;
}

/// general.name: the source GGUF's, else the source file or folder name.
std::string model_name(const ModelFile& m) {
  if (m.gguf && m.gguf->find("general.name")) {
    if (auto name = m.gguf->get_string("general.name")) return *name;
  }
  return fs::path(m.path).filename().replace_extension().string();
}

/// The tokenizer.* keys: m's own GGUF metadata, else converted / copied from `tokenizer_path`.
Status add_tokenizer(GgufWriter& w, const ModelFile& m, const std::string& tokenizer_path) {
  if (m.gguf && m.gguf->find("tokenizer.ggml.model")) return copy_tokenizer_metadata(w, *m.gguf, m.path);
  if (tokenizer_path.empty()) {
    return not_found(m.path + ": the model has no tokenizer metadata; pass its tokenizer file (llama2.c tokenizer.bin or a vocab GGUF)");
  }
  std::error_code ec;
  if (!fs::is_regular_file(tokenizer_path, ec)) return not_found(tokenizer_path + ": no such tokenizer file");
  if (is_gguf_file(tokenizer_path)) return copy_tokenizer_metadata(w, tokenizer_path, m.config.vocab_size);
  if (tokenizer_path.ends_with(".json") || tokenizer_path.ends_with(".model")) {
    return unsupported(tokenizer_path + ": save_gguf_model converts llama2.c tokenizer.bin files and copies vocab GGUFs; "
                       "convert a tokenizer.json / tokenizer.model with llama.cpp's converter");
  }
  return add_llama2c_tokenizer_metadata(w, tokenizer_path, m.config.vocab_size);
}

/// The RoPE tensors llama.cpp's convert_hf_to_gguf.py writes beside the weights, f32
/// [head_dim / 2] each: Llama 3.1+'s rope_freqs.weight (LlamaModel.generate_extra_tensors),
/// LongRoPE's rope_factors_long.weight and rope_factors_short.weight
/// (Phi3MiniModel.generate_extra_tensors); none for other scalings (metadata keys instead).
std::vector<std::pair<std::string, std::vector<float>>> rope_tensors(const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  if (r.kind == RopeScaling::Kind::kLlama3) return {{"rope_freqs.weight", rope_freq_factors(r, c.head_dim, c.rope_theta)}};
  if (r.kind == RopeScaling::Kind::kLongRope) return {{"rope_factors_long.weight", r.long_factor}, {"rope_factors_short.weight", r.short_factor}};
  return {};
}

/// Whether `name` is blk.L.<ffn>.weight.
bool is_ffn(std::string_view name, std::string_view ffn) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return false;
  name.remove_suffix(std::string_view(".weight").size());
  return name.ends_with(ffn) && name.size() > ffn.size() && name[name.size() - ffn.size() - 1] == '.';
}

/// The ffn_gate beside ffn_up tensor `up_name`.
std::string gate_of(std::string up_name) {
  return up_name.replace(up_name.rfind("ffn_up"), std::string_view("ffn_up").size(), "ffn_gate");
}

/// Whether tensor `name` of m is written shifted: an RMSNorm weight of a model whose norms scale
/// by (offset + w) with offset != 0 (a Gemma 2 Hugging Face model) goes to GGUF as f32 offset + w.
bool shifted(const ModelFile& m, const std::string& name) {
  return m.config.norm_weight_offset != 0.0f && is_norm_weight(name);
}

/// A tensor of the GGUF file: its name, shape, and the canonical tensors whose rows it holds
/// in order (none: the canonical tensor is written inside another one).
struct GgufTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<const TensorView*> parts;
};

/// What canonical tensor `name` is written as: Phi-3's GGUF ffn_up holds the layer's gate rows
/// then its up rows (llama.cpp LLM_FFN_SWIGLU on a fused tensor); expert 0's matrix opens the
/// stacked blk.L.<proj>_exps.weight [n_experts, rows, cols] that holds every expert's.
GgufTensor gguf_tensor_of(const ModelFile& m, const Architecture& arch, const std::string& name) {
  const TensorView& t = m.tensors.at(name);
  if (const auto stacked = stacked_expert_name(name)) {
    if (stacked->second != 0) return {};
    std::vector<std::int64_t> shape = t.shape;
    shape.insert(shape.begin(), m.config.n_experts);
    return {stacked->first, std::move(shape), expert_parts(m, stacked->first)};
  }
  if (arch.fused_gate_up && is_ffn(name, "ffn_gate")) return {};
  if (arch.fused_gate_up && is_ffn(name, "ffn_up")) return {name, {2 * t.shape[0], t.shape[1]}, {m.find(gate_of(name)), &t}};
  return {name, t.shape, {&t}};
}

}  // namespace

Status save_gguf_model(const ModelFile& m, const std::string& path, const std::string& tokenizer_path,
                       std::optional<std::uint32_t> file_type) {
  const Architecture* arch = find_architecture(m.config.arch);
  if (!arch) return unsupported(m.path + ": architecture '" + m.config.arch + "' has no GGUF form");
  GgufWriter w;
  PEREGRINE_RETURN_IF_ERROR(add_llama_metadata(w, model_name(m), m.config, main_matrix_dtype(m), file_type));
  PEREGRINE_RETURN_IF_ERROR(add_tokenizer(w, m, tokenizer_path));
  const auto rope = rope_tensors(m.config);
  for (const auto& [name, values] : rope) {
    PEREGRINE_RETURN_IF_ERROR(w.add_tensor(name, DType::kF32, {static_cast<std::int64_t>(values.size())}));
  }
  for (const auto& [name, t] : m.tensors) {
    const GgufTensor g = gguf_tensor_of(m, *arch, name);
    if (g.parts.empty()) continue;  // inside a fused or stacked tensor
    if (g.parts.size() > 1) PEREGRINE_RETURN_IF_ERROR(check_concat_rows(g.name, g.parts));
    PEREGRINE_RETURN_IF_ERROR(w.add_tensor(g.name, shifted(m, name) ? DType::kF32 : t.dtype, g.shape));
  }
  PEREGRINE_RETURN_IF_ERROR(w.begin(path));
  for (const auto& [name, values] : rope) {
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data({reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)}));
  }
  for (const auto& [name, t] : m.tensors) {
    const GgufTensor g = gguf_tensor_of(m, *arch, name);
    if (g.parts.empty()) continue;
    OwnedTensor rows;
    if (g.parts.size() > 1) {
      PEREGRINE_ASSIGN_OR_RETURN(rows, concat_rows(g.name, g.parts));
    } else if (shifted(m, name)) {
      rows = shifted_norm(t, m.config.norm_weight_offset);
    } else {  // Q/K rows in the family's GGUF pairing
      PEREGRINE_ASSIGN_OR_RETURN(rows, in_rope_order(t, m.config.head_dim, m.config.rope_style, arch->gguf_rope_style));
    }
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data({static_cast<const std::uint8_t*>(rows.view.data), rows.view.nbytes}));
  }
  return w.finish();
}

}  // namespace peregrine

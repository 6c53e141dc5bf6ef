// save_hf_model (model_writer.h): a ModelFile as a Hugging Face folder.
#include <filesystem>

#include "formats/hf/awq_layout.h"
#include "formats/hf/compressed_layout.h"
#include "formats/fused_projections.h"
#include "formats/hf/gptq_layout.h"
#include "formats/hf/hf_quant_plan.h"
#include "formats/owned_tensor.h"
#include "formats/rope_rows.h"
#include "peregrine/core/output_file.h"
#include "peregrine/formats/gguf/gguf_llama_metadata.h"
#include "peregrine/formats/gguf/gguf_writer.h"
#include "peregrine/formats/hf/hf_config_writer.h"
#include "peregrine/formats/hf/hf_names.h"
#include "peregrine/formats/model_writer.h"
#include "peregrine/formats/safetensors/safetensors_writer.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

bool is_float(DType t) { return safetensors_dtype_of(t).has_value(); }

/// The safetensors tensors `t` is written as under `q` (a float tensor: one, named by its own
/// suffix, "weight" or "bias").
std::vector<HfPart> parts_of(const TensorView& t, const HfQuantConfig& q, const std::string& float_suffix) {
  if (is_float(t.dtype)) return {{float_suffix, *safetensors_dtype_of(t.dtype), t.shape}};
  const std::int64_t out = t.shape[0], in = t.shape[1];
  switch (q.method) {
    case HfQuantMethod::kGptq: return gptq_parts(out, in, q);
    case HfQuantMethod::kAwq: return awq_parts(out, in, q);
    default: return compressed_parts(t);
  }
}

/// The bytes of parts_of(t, q), in that order (quantized linears only).
std::vector<Bytes> encode(const TensorView& t, const HfQuantConfig& q) {
  switch (q.method) {
    case HfQuantMethod::kGptq: return encode_gptq(t, q);
    case HfQuantMethod::kAwq: return encode_awq(t, q);
    default: return encode_compressed(t);
  }
}

Status write_tensor(SafetensorsWriter& w, const TensorView& t, const HfQuantConfig& q) {
  if (is_float(t.dtype)) return w.write_tensor_data({static_cast<const std::uint8_t*>(t.data), t.nbytes});
  for (const Bytes& b : encode(t, q)) PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data(b));
  return Status::ok();
}

/// One safetensors entry: the canonical tensors it holds, row after row (several only for
/// Phi-3's fused qkv_proj / gate_up_proj), under the HF name of `name`.
struct HfEntry {
  std::string name;                       // canonical name whose HF name is used
  std::vector<const TensorView*> parts;
};

/// m's tensors as HF entries: for a fused-projection family (Phi-3) attn_q/k/v become
/// attn_qkv and ffn_gate/up become ffn_gate_up, as its checkpoints hold them.
std::vector<HfEntry> hf_entries(const ModelFile& m) {
  const Architecture* arch = find_architecture(m.config.arch);
  std::vector<HfEntry> out;
  for (const auto& [name, t] : m.tensors) {
    if (!arch || !arch->fused_gate_up || !name.starts_with("blk.")) {
      out.push_back({name, {&t}});
      continue;
    }
    const std::string prefix = name.substr(0, name.find('.', 4) + 1);  // "blk.L."
    if (name == prefix + "attn_q.weight") {
      out.push_back({prefix + "attn_qkv.weight", {&t, m.find(prefix + "attn_k.weight"), m.find(prefix + "attn_v.weight")}});
    } else if (name == prefix + "ffn_up.weight") {
      out.push_back({prefix + "ffn_gate_up.weight", {m.find(prefix + "ffn_gate.weight"), &t}});
    } else if (name != prefix + "attn_k.weight" && name != prefix + "attn_v.weight" && name != prefix + "ffn_gate.weight") {
      out.push_back({name, {&t}});
    }
  }
  return out;
}

/// What an RMSNorm weight of m gains in the family's HF form, whose norms scale by
/// (hf_norm_offset + w): 0 for Llama-style norms, -1 for a Gemma 2 model read from GGUF (1 + w).
float hf_norm_delta(const ModelFile& m, const std::string& name) {
  const Architecture* arch = find_architecture(m.config.arch);
  return arch && is_norm_weight(name) ? m.config.norm_weight_offset - arch->hf_norm_offset : 0.0f;
}

/// The entry's tensor as written: Q/K rows in HF's RoPE order, fused parts concatenated, norms
/// in the family's HF form (f32 when shifted).
Expected<OwnedTensor> entry_tensor(const ModelFile& m, const HfEntry& e) {
  if (const float delta = hf_norm_delta(m, e.name); delta != 0.0f) return shifted_norm(*e.parts[0], delta);
  if (e.parts.size() == 1) return in_rope_order(*e.parts[0], m.config.head_dim, m.config.rope_style, RopeStyle::kNeox);
  return concat_rows(e.name, e.parts);  // fused families pair RoPE dims as NeoX in every format
}

/// model.safetensors: every tensor under its HF name, Q/K rows in HF's RoPE order.
Status write_weights(const ModelFile& m, const HfQuantConfig& q, const std::string& path) {
  SafetensorsWriter w;
  w.add_metadata("format", "pt");
  const Architecture* arch = find_architecture(m.config.arch);
  if (!arch) return unsupported(m.path + ": architecture '" + m.config.arch + "' has no Hugging Face form");
  const std::vector<HfEntry> entries = hf_entries(m);
  for (const HfEntry& e : entries) {
    const auto hf = hf_tensor_name(e.name, arch);
    if (!hf) return invalid_argument("tensor '" + e.name + "' has no Hugging Face name");
    if (e.parts.size() > 1 && !is_float(e.parts[0]->dtype)) {
      return unsupported(m.path + ": '" + e.name + "' would fuse quantized tensors; " + m.config.arch +
                         " Hugging Face folders are written in F32 / F16 / BF16 only");
    }
    TensorView t = *e.parts[0];
    for (std::size_t i = 1; i < e.parts.size(); ++i) t.shape[0] += e.parts[i]->shape[0];
    if (e.name.ends_with("ffn_gate_inp_shexp.weight")) t.shape.insert(t.shape.begin(), 1);  // HF Linear(dim, 1)
    if (hf_norm_delta(m, e.name) != 0.0f) t.dtype = DType::kF32;
    const std::size_t dot = hf->rfind('.');  // "<module>.weight" / "<module>.bias"
    const std::string module = hf->substr(0, dot);
    for (HfPart& p : parts_of(t, q, hf->substr(dot + 1))) {
      PEREGRINE_RETURN_IF_ERROR(w.add_tensor(module + "." + p.suffix, p.dtype, std::move(p.shape)));
    }
  }
  PEREGRINE_RETURN_IF_ERROR(w.begin(path));
  for (const HfEntry& e : entries) {
    PEREGRINE_ASSIGN_OR_RETURN(OwnedTensor rows, entry_tensor(m, e));
    PEREGRINE_RETURN_IF_ERROR(write_tensor(w, rows.view, q));
  }
  return w.finish();
}

Status write_text(const fs::path& path, const std::string& text) {
  PEREGRINE_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path.string()));
  PEREGRINE_RETURN_IF_ERROR(f.write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}));
  return f.close();
}

/// config.json (+ quantization_config), and AutoGPTQ's quantize_config.json for GPTQ.
Status write_configs(const ModelFile& m, const HfQuantConfig& q, const fs::path& dir) {
  const TensorView* embd = m.find("token_embd.weight");
  auto config = hf_config(m.config, embd && is_float(embd->dtype) ? embd->dtype : DType::kF16);
  if (q.method != HfQuantMethod::kNone) config["quantization_config"] = hf_quant_config_json(q);
  PEREGRINE_RETURN_IF_ERROR(write_text(dir / "config.json", config.dump(2) + "\n"));
  if (q.method != HfQuantMethod::kGptq) return Status::ok();
  return write_text(dir / "quantize_config.json", hf_quant_config_json(q).dump(2) + "\n");
}

/// The file name a tokenizer file is copied under, by its kind.
std::string hf_tokenizer_name(const std::string& path) {
  if (path.ends_with(".json")) return "tokenizer.json";
  if (path.ends_with(".model")) return "tokenizer.model";
  if (is_gguf_file(path)) return "tokenizer.gguf";
  return "tokenizer.bin";
}

/// Checked before anything is written: `tokenizer_path` exists, or m has GGUF tokenizer metadata.
Status check_tokenizer(const ModelFile& m, const std::string& tokenizer_path) {
  std::error_code ec;
  if (!tokenizer_path.empty()) {
    if (!fs::is_regular_file(tokenizer_path, ec)) return not_found(tokenizer_path + ": no such tokenizer file");
    return Status::ok();
  }
  if (m.gguf && m.gguf->find("tokenizer.ggml.model")) return Status::ok();
  return not_found(m.path + ": no tokenizer to write beside the model; pass its tokenizer file");
}

Status copy_to(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return io_error("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  return Status::ok();
}

/// `tokenizer_path` copied by its kind, with the files beside it that the tokenizer and chat
/// template readers look for (tokenizer_config.json: BOS/EOS hints and chat_template;
/// chat_template.jinja).
Status copy_tokenizer(const std::string& tokenizer_path, const fs::path& dir) {
  PEREGRINE_RETURN_IF_ERROR(copy_to(tokenizer_path, dir / hf_tokenizer_name(tokenizer_path)));
  const fs::path from_dir = fs::path(tokenizer_path).parent_path();
  std::error_code ec;
  for (const char* companion : {"tokenizer_config.json", "chat_template.jinja"}) {
    const fs::path from = from_dir / companion;
    if (fs::is_regular_file(from, ec) && !fs::equivalent(from_dir, dir, ec)) PEREGRINE_RETURN_IF_ERROR(copy_to(from, dir / companion));
  }
  return Status::ok();
}

/// m's GGUF vocabulary as a vocab-only tokenizer.gguf, and its chat template (if any) as
/// chat_template.jinja, where the HF readers look for it.
Status write_gguf_tokenizer(const ModelFile& m, const fs::path& dir) {
  GgufWriter w;
  PEREGRINE_RETURN_IF_ERROR(w.add("general.architecture", gguf_string("llama")));
  PEREGRINE_RETURN_IF_ERROR(copy_tokenizer_metadata(w, *m.gguf, m.path));
  PEREGRINE_RETURN_IF_ERROR(w.begin((dir / "tokenizer.gguf").string()));
  PEREGRINE_RETURN_IF_ERROR(w.finish());
  if (!m.gguf->find("tokenizer.chat_template")) return Status::ok();
  PEREGRINE_ASSIGN_OR_RETURN(std::string chat_template, m.gguf->get_string("tokenizer.chat_template"));
  return write_text(dir / "chat_template.jinja", chat_template);
}

}  // namespace

Status save_hf_model(const ModelFile& m, const std::string& dir, HfQuantLayout layout, const std::string& tokenizer_path) {
  if (m.find("rope_freqs.weight")) {
    return unsupported(m.path + ": its rope_freqs.weight tensor (per-pair RoPE factors, as llama.cpp stores Llama 3.1+ scaling) "
                       "has no config.json form; convert from the original Hugging Face folder instead");
  }
  PEREGRINE_ASSIGN_OR_RETURN(const HfQuantConfig q, plan_hf_quant(m, layout));
  PEREGRINE_RETURN_IF_ERROR(check_tokenizer(m, tokenizer_path));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) return invalid_argument(dir + " exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create directory " + dir + ": " + ec.message());
  PEREGRINE_RETURN_IF_ERROR(write_weights(m, q, (fs::path(dir) / "model.safetensors").string()));
  PEREGRINE_RETURN_IF_ERROR(write_configs(m, q, dir));
  return tokenizer_path.empty() ? write_gguf_tokenizer(m, dir) : copy_tokenizer(tokenizer_path, dir);
}

}  // namespace peregrine

#include "peregrine/model/synth_model.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include "peregrine/core/output_file.h"
#include "peregrine/core/prng.h"
#include "peregrine/formats/gguf/gguf_llama_metadata.h"
#include "peregrine/formats/gguf/gguf_writer.h"
#include "peregrine/formats/hf/hf_config_writer.h"
#include "peregrine/formats/hf/hf_names.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/formats/safetensors/safetensors_writer.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

constexpr float kUniformBound = 0.0346410162f;       // 0.02 * sqrt(3): uniform with std 0.02
constexpr std::size_t kChunkBytes = std::size_t{32} << 20;  // encoded rows per write

/// A tensor to synthesize. Its rows are those of a GGUF tensor (seed_name, from row seed_row0
/// on), so a Hugging Face tensor holds the same values as the GGUF one it comes from.
struct SynthTensor {
  std::string name;                 // the name written (GGUF, or Hugging Face)
  std::vector<std::int64_t> shape;  // {out, in} for a matrix, {n_experts, out, in} when stacked
  std::string seed_name;            // the GGUF tensor whose rows these are
  std::int64_t seed_row0 = 0;
  bool ones = false;                // a norm weight, bias or gate vector: all 1 (in GGUF form)
  std::int64_t rope_heads = 0;      // attn_q / attn_k of an interleaved-RoPE family: heads whose
                                    // rows HF orders by halves
  std::vector<float> values;        // a vector with given values (rope_freqs.weight), else empty
  std::int64_t n_rows() const {
    std::int64_t n = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
    return n;
  }
};

/// The tensors of a GGUF model of config `c` in llama.cpp's order, with its family's names
/// (model/spec/architecture.h): Phi-3's fused attn_qkv and ffn_up, the experts stacked as
/// ffn_{gate,up,down}_exps, Qwen2's biases, Qwen3's / OLMoE's Q/K norms.
std::vector<SynthTensor> gguf_tensors(const ModelConfig& c) {
  const Architecture& arch = *find_architecture(c.arch);  // check_shape validated the config
  std::vector<SynthTensor> t;
  const auto add = [&](const std::string& name, std::int64_t rope_heads = 0) {
    std::vector<std::int64_t> shape = *llama_tensor_shape(c, name);
    const bool ones = shape.size() == 1;
    t.push_back({name, std::move(shape), name, 0, ones, arch.gguf_rope_style == RopeStyle::kInterleaved ? rope_heads : 0, {}});
  };
  add("token_embd.weight");
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const auto name = [l](const char* n) { return "blk." + std::to_string(l) + "." + n; };
    add(name("attn_norm.weight"));
    if (arch.fused_gate_up) {
      add(name("attn_qkv.weight"));
    } else {
      add(name("attn_q.weight"), c.n_heads);
      add(name("attn_k.weight"), c.n_kv_heads);
      add(name("attn_v.weight"));
    }
    if (arch.qkv_bias) {
      for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) add(name(b));
    }
    if (arch.qk_norm != QkNorm::kNone) {
      for (const char* n : {"attn_q_norm.weight", "attn_k_norm.weight"}) add(name(n));
    }
    add(name("attn_output.weight"));
    if (arch.post_norms) add(name("post_attention_norm.weight"));
    add(name("ffn_norm.weight"));
    if (c.n_experts > 0) {
      for (const char* n : {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}) add(name(n));
      if (c.shared_expert_ffn_dim > 0) {
        for (const char* n : {"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}) {
          add(name(n));
        }
      }
    } else if (arch.fused_gate_up) {  // llama.cpp's Phi-3 ffn_up: gate rows, then up rows
      add(name("ffn_gate_up.weight"));
      t.back().name = t.back().seed_name = name("ffn_up.weight");
      add(name("ffn_down.weight"));
    } else {
      for (const char* n : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}) add(name(n));
    }
    if (arch.post_norms) add(name("post_ffw_norm.weight"));
  }
  add("output_norm.weight");
  if (!c.tied_embeddings) add("output.weight");
  if (c.rope_scaling.kind == RopeScaling::Kind::kLlama3) {  // as llama.cpp's Llama 3.1+ GGUFs hold it
    add("rope_freqs.weight");
    t.back().values = rope_freq_factors(c.rope_scaling, c.head_dim, c.rope_theta);
  }
  return t;
}

/// The Hugging Face tensors of the same model: every stacked expert tensor as one tensor per
/// expert, Phi-3's GGUF ffn_up as mlp.gate_up_proj, the shared expert's gate as [1, dim], the
/// norms of a family whose HF weights are offset (Gemma: 1 + w) as GGUF's 1 minus the offset.
Expected<std::vector<SynthTensor>> hf_tensors(const ModelConfig& c) {
  const Architecture& arch = *find_architecture(c.arch);
  std::vector<SynthTensor> out;
  for (SynthTensor t : gguf_tensors(c)) {
    if (t.name == "rope_freqs.weight") continue;  // config.json's rope_scaling says it
    std::vector<std::pair<std::string, std::int64_t>> parts = {{t.name, 0}};  // canonical name, first row
    if (const auto stacked = t.name.find("_exps.weight"); stacked != std::string::npos) {
      parts.clear();
      const std::string proj = t.name.substr(t.name.find('.', 4) + 1, stacked - t.name.find('.', 4) - 1);
      for (std::int64_t e = 0; e < c.n_experts; ++e) {
        parts.emplace_back(expert_tensor_name(std::stoll(t.name.substr(4)), proj, e), e * t.shape[1]);
      }
      t.shape.erase(t.shape.begin());
    } else if (arch.fused_gate_up && t.name.ends_with("ffn_up.weight")) {
      parts = {{t.name.substr(0, t.name.size() - std::string_view("ffn_up.weight").size()) + "ffn_gate_up.weight", 0}};
    } else if (t.name.ends_with("ffn_gate_inp_shexp.weight")) {
      t.shape.insert(t.shape.begin(), 1);
    }
    for (const auto& [canonical, row0] : parts) {
      const auto hf = hf_tensor_name(canonical, &arch);
      if (!hf) return unsupported("tensor '" + canonical + "' has no Hugging Face name");
      SynthTensor part = t;
      part.name = *hf;
      part.seed_row0 = row0;
      if (is_norm_weight(canonical) && arch.hf_norm_offset != 0.0f) {
        part.values.assign(static_cast<std::size_t>(t.shape.back()), 1.0f - arch.hf_norm_offset);
      }
      out.push_back(std::move(part));
    }
  }
  return out;
}

/// HF row j of a Q/K matrix holds GGUF row h·hd + 2i + half, where j = h·hd + half·hd/2 + i
/// (the inverse of convert_hf_to_gguf.py's permute: HF rotates halves, GGUF adjacent pairs).
std::int64_t gguf_row_of_hf_row(std::int64_t j, std::int64_t head_dim) {
  const std::int64_t within = j % head_dim, half = head_dim / 2;
  return j - within + 2 * (within % half) + within / half;
}

/// The values of row `row` of `t` (a GGUF row index of t's own rows).
void fill_row(const SynthTensor& t, std::uint64_t seed, std::int64_t row, std::span<float> out) {
  if (!t.values.empty()) {
    std::copy(t.values.begin(), t.values.end(), out.begin());
    return;
  }
  if (t.ones) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  std::uint64_t s = seed;
  std::uint64_t row_state = splitmix64(s) ^ fnv1a64(t.seed_name) ^ static_cast<std::uint64_t>(t.seed_row0 + row);
  Xoshiro256Plus(splitmix64(row_state)).fill_uniform(out, kUniformBound);
}

/// Generates `t` as `dtype`, a chunk of rows at a time (rows split over `pool`), and streams
/// each chunk to `w` (GgufWriter or SafetensorsWriter). `head_dim` > 0: Q/K rows in HF order.
template <typename Writer>
Status stream_tensor(Writer& w, const SynthTensor& t, DType dtype, std::uint64_t seed, std::int64_t head_dim,
                     ThreadPool& pool) {
  const auto n = static_cast<std::size_t>(t.shape.back());
  const std::size_t row_bytes = *dtype_row_bytes(dtype, n);
  const std::int64_t chunk_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(kChunkBytes / row_bytes));
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min(chunk_rows, t.n_rows())) * row_bytes);
  for (std::int64_t first = 0; first < t.n_rows(); first += chunk_rows) {
    const std::int64_t rows = std::min(chunk_rows, t.n_rows() - first);
    pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> values(n);
      for (std::int64_t r = begin; r < end; ++r) {
        const std::int64_t row = first + r;
        fill_row(t, seed, head_dim > 0 && t.rope_heads > 0 ? gguf_row_of_hf_row(row, head_dim) : row, values);
        quantize_rtn(dtype, values, buf.data() + static_cast<std::size_t>(r) * row_bytes);
      }
    });
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data({buf.data(), static_cast<std::size_t>(rows) * row_bytes}));
  }
  return Status::ok();
}

/// Writes the declared `tensors` (as `dtypes`) after the writer's header, then finishes it.
template <typename Writer>
Expected<SynthReport> write_model(Writer& w, const std::string& path, const std::vector<SynthTensor>& tensors,
                                  const std::vector<DType>& dtypes, std::uint64_t seed, std::int64_t head_dim,
                                  ThreadPool& pool) {
  SynthReport report;
  PEREGRINE_RETURN_IF_ERROR(w.begin(path));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    PEREGRINE_RETURN_IF_ERROR(stream_tensor(w, tensors[i], dtypes[i], seed, head_dim, pool));
    report.weight_bytes += *dtype_row_bytes(dtypes[i], static_cast<std::uint64_t>(tensors[i].shape.back())) *
                           static_cast<std::uint64_t>(tensors[i].n_rows());
  }
  PEREGRINE_RETURN_IF_ERROR(w.finish());
  report.n_tensors = tensors.size();
  return report;
}

Status check_shape(const ModelShape& shape) {
  if (Status st = shape.config.validate(); !st) return invalid_argument("shape " + shape.name + ": " + st.message());
  return Status::ok();
}

Status write_text_file(const std::string& path, const std::string& text) {
  PEREGRINE_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path));
  PEREGRINE_RETURN_IF_ERROR(f.write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}));
  return f.close();
}

}  // namespace

Expected<SynthReport> synth_gguf(const ModelShape& shape, const SynthOptions& o, const std::string& path,
                                 ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(check_shape(shape));
  GgufWriter w;
  PEREGRINE_RETURN_IF_ERROR(add_llama_metadata(w, shape.name, shape.config, o.dtype));
  if (!o.vocab_gguf.empty()) PEREGRINE_RETURN_IF_ERROR(copy_tokenizer_metadata(w, o.vocab_gguf, shape.config.vocab_size));
  if (o.vocab_gguf.empty()) PEREGRINE_RETURN_IF_ERROR(w.add("tokenizer.ggml.model", gguf_string("none")));
  const auto tensors = gguf_tensors(shape.config);
  std::vector<DType> dtypes;
  std::vector<std::string> fallback;
  for (const auto& t : tensors) {
    const bool vector = t.shape.size() == 1;
    dtypes.push_back(vector ? DType::kF32 : matrix_dtype_for(o.dtype, t.shape.back()));
    if (!vector && dtypes.back() != o.dtype) fallback.push_back(t.name);
    PEREGRINE_RETURN_IF_ERROR(w.add_tensor(t.name, dtypes.back(), t.shape));
  }
  PEREGRINE_ASSIGN_OR_RETURN(SynthReport report, write_model(w, path, tensors, dtypes, o.seed, 0, pool));
  report.f16_fallback = std::move(fallback);
  return report;
}

Expected<SynthReport> synth_hf(const ModelShape& shape, const SynthOptions& o, const std::string& dir,
                               ThreadPool& pool) {
  if (!safetensors_dtype_name(o.dtype)) {
    return unsupported("safetensors cannot hold " + std::string(dtype_name(o.dtype)) +
                       " weights (use f32, f16 or bf16, or the gguf format)");
  }
  PEREGRINE_RETURN_IF_ERROR(check_shape(shape));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) return invalid_argument(dir + " exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create directory " + dir + ": " + ec.message());
  SafetensorsWriter w;
  w.add_metadata("format", "pt");
  PEREGRINE_ASSIGN_OR_RETURN(const auto tensors, hf_tensors(shape.config));
  for (const auto& t : tensors) PEREGRINE_RETURN_IF_ERROR(w.add_tensor(t.name, o.dtype, t.shape));
  const std::vector<DType> dtypes(tensors.size(), o.dtype);
  PEREGRINE_ASSIGN_OR_RETURN(SynthReport report, write_model(w, (fs::path(dir) / "model.safetensors").string(), tensors,
                                                             dtypes, o.seed, shape.config.head_dim, pool));
  PEREGRINE_RETURN_IF_ERROR(write_text_file((fs::path(dir) / "config.json").string(), hf_config_json(shape.config, o.dtype)));
  if (!o.hf_tokenizer.empty()) {
    const fs::path to = fs::path(dir) / fs::path(o.hf_tokenizer).filename();
    fs::copy_file(o.hf_tokenizer, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return io_error("cannot copy " + o.hf_tokenizer + " to " + to.string() + ": " + ec.message());
  }
  return report;
}

}  // namespace peregrine

#include "peregrine/model/synth_model.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include "peregrine/core/output_file.h"
#include "peregrine/core/prng.h"
#include "peregrine/formats/gguf_llama_metadata.h"
#include "peregrine/formats/gguf_writer.h"
#include "peregrine/formats/hf_config_writer.h"
#include "peregrine/formats/hf_names.h"
#include "peregrine/formats/safetensors.h"
#include "peregrine/formats/safetensors_writer.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;

constexpr float kUniformBound = 0.0346410162f;       // 0.02 * sqrt(3): uniform with std 0.02
constexpr std::size_t kChunkBytes = std::size_t{32} << 20;  // encoded rows per write

/// A tensor to synthesize, under its canonical name (which also seeds it).
struct SynthTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // {out, in}, or {dim} for a norm
  std::int64_t rope_heads = 0;      // attn_q / attn_k: heads whose rows HF orders by halves
  bool is_norm() const { return shape.size() == 1; }
  std::int64_t n_rows() const { return is_norm() ? 1 : shape[0]; }
};

/// The tensors of a llama model in llama.cpp's order.
std::vector<SynthTensor> llama_tensors(const ModelConfig& c) {
  const std::int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<SynthTensor> t = {{"token_embd.weight", {c.vocab_size, c.dim}}};
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    auto name = [l](const char* n) { return layer_tensor_name(l, n); };
    t.push_back({name("attn_norm"), {c.dim}});
    t.push_back({name("attn_q"), {q_dim, c.dim}, c.n_heads});
    t.push_back({name("attn_k"), {kv_dim, c.dim}, c.n_kv_heads});
    t.push_back({name("attn_v"), {kv_dim, c.dim}});
    t.push_back({name("attn_output"), {c.dim, q_dim}});
    t.push_back({name("ffn_norm"), {c.dim}});
    t.push_back({name("ffn_gate"), {c.ffn_dim, c.dim}});
    t.push_back({name("ffn_up"), {c.ffn_dim, c.dim}});
    t.push_back({name("ffn_down"), {c.dim, c.ffn_dim}});
  }
  t.push_back({"output_norm.weight", {c.dim}});
  if (!c.tied_embeddings) t.push_back({"output.weight", {c.vocab_size, c.dim}});
  return t;
}

/// HF row j of a Q/K matrix holds GGUF row h·hd + 2i + half, where j = h·hd + half·hd/2 + i
/// (the inverse of convert_hf_to_gguf.py's permute: HF rotates halves, GGUF adjacent pairs).
std::int64_t gguf_row_of_hf_row(std::int64_t j, std::int64_t head_dim) {
  const std::int64_t within = j % head_dim, half = head_dim / 2;
  return j - within + 2 * (within % half) + within / half;
}

/// The values of GGUF row `row` of `t`.
void fill_row(const SynthTensor& t, std::uint64_t seed, std::int64_t row, std::span<float> out) {
  if (t.is_norm()) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  std::uint64_t s = seed;
  std::uint64_t row_state = splitmix64(s) ^ fnv1a64(t.name) ^ static_cast<std::uint64_t>(row);
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
  const auto tensors = llama_tensors(shape.config);
  std::vector<DType> dtypes;
  std::vector<std::string> fallback;
  for (const auto& t : tensors) {
    dtypes.push_back(t.is_norm() ? DType::kF32 : matrix_dtype_for(o.dtype, t.shape.back()));
    if (!t.is_norm() && dtypes.back() != o.dtype) fallback.push_back(t.name);
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
  const auto tensors = llama_tensors(shape.config);
  for (const auto& t : tensors) PEREGRINE_RETURN_IF_ERROR(w.add_tensor(*hf_tensor_name(t.name), o.dtype, t.shape));
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

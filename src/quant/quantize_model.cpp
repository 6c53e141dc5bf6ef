#include "peregrine/quant/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "peregrine/model/activation_observer.h"
#include "peregrine/quant/awq.h"
#include "peregrine/quant/calibration.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/float_model.h"
#include "peregrine/quant/fp8.h"
#include "peregrine/quant/gptq.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"
#include "peregrine/quant/rotate_model.h"
#include "peregrine/quant/scale_folding.h"
#include "peregrine/quant/smoothquant.h"

namespace peregrine {
namespace {

constexpr LinearInput kInputs[] = {LinearInput::kAttention, LinearInput::kAttentionOutput, LinearInput::kFfn,
                                   LinearInput::kFfnDown};

constexpr std::pair<QuantMethod, std::string_view> kMethodNames[] = {
    {QuantMethod::kRtn, "rtn"},         {QuantMethod::kGptq, "gptq"},         {QuantMethod::kAwq, "awq"},
    {QuantMethod::kSmoothQuant, "smoothquant"}, {QuantMethod::kLlmInt8, "llm-int8"}, {QuantMethod::kFp8, "fp8"}};

// An encoded tensor.
struct Encoded {
  DType dtype = DType::kF32;
  QuantParams quant;
  std::vector<std::uint8_t> bytes;
};

struct Matrix {
  std::span<float> w;
  std::int64_t rows, cols;
};

Matrix matrix(FloatModel& m, const std::string& name) {
  const auto& shape = m.shape(name);
  return {m.tensor(name), shape.front(), shape.back()};
}

// The kInt parameters of `o` for rows of `cols` values.
QuantParams int_params(const QuantizeOptions& o, std::int64_t cols) {
  QuantParams p;
  p.bits = o.bits;
  p.group_size = o.group <= 0 ? cols : std::min(o.group, cols);
  p.asymmetric = o.asymmetric;
  p.act_bits = o.act_bits;
  if (o.method == QuantMethod::kSmoothQuant || o.method == QuantMethod::kLlmInt8) {
    p = QuantParams{8, cols, false, 8, o.method == QuantMethod::kLlmInt8 ? o.outlier_threshold : 0.0f};
  }
  return p;
}

// Encodes each row with quantize_rtn's per-row formats (block formats, F16, F8 per-channel),
// the rows split across `pool` when given (each row's bytes depend on that row only).
Encoded encode_rows(const Matrix& m, DType t, ThreadPool* pool = nullptr) {
  const std::size_t rb = *dtype_row_bytes(t, static_cast<std::uint64_t>(m.cols));
  Encoded e{t, {}, std::vector<std::uint8_t>(rb * static_cast<std::size_t>(m.rows))};
  auto rows = [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) {
      quantize_rtn(t, std::span<const float>(m.w).subspan(static_cast<std::size_t>(r * m.cols), static_cast<std::size_t>(m.cols)),
                   e.bytes.data() + rb * static_cast<std::size_t>(r));
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(m.rows, rows);
  } else {
    rows(0, m.rows);
  }
  return e;
}

// FP8 with one scale for the whole tensor (amax / fp8 max), repeated in every row.
Encoded encode_fp8_per_tensor(const Matrix& m, DType t) {
  float amax = 0.0f;
  for (float v : m.w) amax = std::max(amax, std::fabs(v));
  const float s = amax / fp8_max(t), inv = s != 0.0f ? 1.0f / s : 0.0f;
  const std::size_t rb = *dtype_row_bytes(t, static_cast<std::uint64_t>(m.cols));
  Encoded e{t, {}, std::vector<std::uint8_t>(rb * static_cast<std::size_t>(m.rows))};
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::uint8_t* row = e.bytes.data() + rb * static_cast<std::size_t>(r);
    std::memcpy(row, &s, sizeof s);
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const float x = m.w[static_cast<std::size_t>(r * m.cols + c)] * inv;
      row[kRowScaleBytes + static_cast<std::size_t>(c)] = t == DType::kF8E4M3 ? f32_to_fp8_e4m3(x) : f32_to_fp8_e5m2(x);
    }
  }
  return e;
}

// Round-to-nearest encoding of a linear in the format `o` asks for.
Encoded encode_linear(const Matrix& m, const QuantizeOptions& o, std::optional<DType> gguf) {
  if (gguf) return encode_rows(m, matrix_dtype_for(*gguf, m.cols));
  if (o.method == QuantMethod::kFp8) return o.group == 0 ? encode_fp8_per_tensor(m, o.fp8) : encode_rows(m, o.fp8);
  const QuantParams p = int_params(o, m.cols);
  return {DType::kInt, p, quantize_int_rtn(m.w, m.rows, m.cols, p, o.group == 0)};
}

// Writes what `e` decodes to back into the working copy (later layers calibrate on it).
void write_back(const Encoded& e, const Matrix& m) {
  TensorView v;
  v.dtype = e.dtype;
  v.quant = e.quant;
  v.shape = {m.rows, m.cols};
  v.data = e.bytes.data();
  v.nbytes = e.bytes.size();
  for (std::int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(v, r, m.w.subspan(static_cast<std::size_t>(r * m.cols), static_cast<std::size_t>(m.cols)));
  }
}

// The state shared by the method steps.
struct Pipeline {
  const QuantizeOptions& o;
  ThreadPool& pool;
  QuantizeReport& report;
  const QuantizeProgress& progress;
  FloatModel fm;
  std::vector<std::vector<std::int32_t>> chunks;
  std::map<std::string, Encoded> linears;

  std::int64_t n_layers() const { return fm.config().n_layers; }

  void step(std::int64_t done, const std::string& what) const {
    if (progress) progress(done, n_layers(), what);
  }

  std::optional<SequentialCalibration> sequential = std::nullopt;  // gptq, awq: the streams entering the current layer

  // Layers' statistics on the current working copy.
  Expected<std::vector<LayerStats>> stats(std::int64_t first, std::int64_t last, bool hessian) {
    PEREGRINE_ASSIGN_OR_RETURN(auto model, LlamaModel::create(fm.view(), WeightPlacement::kInPlace));
    return calibrate(model, first, last, chunks, {hessian, 512}, pool);
  }

  // The statistics of the layer `sequential` is at, on the current working copy.
  Expected<LayerStats> layer_stats(bool hessian) {
    if (!sequential) {
      PEREGRINE_ASSIGN_OR_RETURN(sequential, SequentialCalibration::start(chunks));
    }
    PEREGRINE_ASSIGN_OR_RETURN(auto model, LlamaModel::create(fm.view(), WeightPlacement::kInPlace));
    return sequential->stats(model, {hessian, 512}, pool);
  }

  // Moves `sequential` past its layer, run with the layer's final weights.
  Status next_layer() {
    PEREGRINE_ASSIGN_OR_RETURN(auto model, LlamaModel::create(fm.view(), WeightPlacement::kInPlace));
    return sequential->advance(model, pool);
  }

  void encode_layer_rtn(std::int64_t l, std::optional<DType> gguf) {
    for (LinearInput in : kInputs) {
      for (const char* name : linear_names(in)) {
        const std::string full = layer_tensor_name(l, name);
        linears[full] = encode_linear(matrix(fm, full), o, gguf);
      }
    }
  }

  Status gptq_layer(std::int64_t l) {
    PEREGRINE_ASSIGN_OR_RETURN(const LayerStats stats, layer_stats(true));
    for (LinearInput in : kInputs) {
      const std::vector<double> h = stats[static_cast<std::size_t>(in)].hessian();
      for (const char* name : linear_names(in)) {
        const std::string full = layer_tensor_name(l, name);
        const Matrix m = matrix(fm, full);
        GptqOptions g{int_params(o, m.cols), o.damp_percent, 128, o.act_order};
        PEREGRINE_ASSIGN_OR_RETURN(auto r, gptq_quantize(m.w, m.rows, m.cols, h, g, &pool));
        std::copy(r.dequantized.begin(), r.dequantized.end(), m.w.begin());
        report.notes.push_back(full + ": gptq loss " + std::to_string(r.loss));
        linears[full] = Encoded{DType::kInt, g.params, std::move(r.packed)};
      }
    }
    return next_layer();
  }

  Status awq_layer(std::int64_t l) {
    PEREGRINE_ASSIGN_OR_RETURN(const LayerStats stats, layer_stats(false));
    for (LinearInput in : kInputs) {
      if (!can_fold_input_scales(fm, in)) continue;
      const InputStats& s = stats[static_cast<std::size_t>(in)];
      AwqWeights ws;
      for (const char* name : linear_names(in)) {
        const Matrix m = matrix(fm, layer_tensor_name(l, name));
        ws.w.push_back(m.w);
        ws.rows.push_back(m.rows);
      }
      const AwqOptions ao{int_params(o, s.width), 20};
      PEREGRINE_ASSIGN_OR_RETURN(auto scales, awq_search_scales(ws, s.width, s.sample, s.sample_rows(), s.abs_mean(), ao));
      PEREGRINE_RETURN_IF_ERROR(fold_input_scales(fm, l, in, scales.scales));
      report.notes.push_back("layer " + std::to_string(l) + " " + linear_names(in)[0] + ": awq alpha " +
                             std::to_string(scales.alpha) + ", loss " + std::to_string(scales.loss_awq) + " vs rtn " +
                             std::to_string(scales.loss_rtn));
    }
    encode_layer_rtn(l, std::nullopt);
    for (LinearInput in : kInputs) {
      for (const char* name : linear_names(in)) {
        const std::string full = layer_tensor_name(l, name);
        write_back(linears[full], matrix(fm, full));
      }
    }
    return next_layer();
  }

  Status smooth_all() {
    PEREGRINE_ASSIGN_OR_RETURN(auto all, stats(0, n_layers() - 1, false));
    for (std::int64_t l = 0; l < n_layers(); ++l) {
      for (LinearInput in : kInputs) {
        if (!can_fold_input_scales(fm, in)) continue;
        const InputStats& s = all[static_cast<std::size_t>(l)][static_cast<std::size_t>(in)];
        std::vector<std::span<const float>> ws;
        std::vector<std::int64_t> rows;
        for (const char* name : linear_names(in)) {
          const Matrix m = matrix(fm, layer_tensor_name(l, name));
          ws.push_back(m.w);
          rows.push_back(m.rows);
        }
        PEREGRINE_ASSIGN_OR_RETURN(auto scales, smoothquant_scales(s.abs_max, ws, rows, s.width, o.smooth_alpha));
        PEREGRINE_RETURN_IF_ERROR(fold_input_scales(fm, l, in, scales));
      }
      step(l + 1, "smoothing");
    }
    return Status::ok();
  }

  Status run(std::optional<DType> gguf) {
    if (o.method == QuantMethod::kSmoothQuant || o.smooth) PEREGRINE_RETURN_IF_ERROR(smooth_all());
    for (std::int64_t l = 0; l < n_layers(); ++l) {
      if (o.method == QuantMethod::kGptq) {
        PEREGRINE_RETURN_IF_ERROR(gptq_layer(l));
      } else if (o.method == QuantMethod::kAwq) {
        PEREGRINE_RETURN_IF_ERROR(awq_layer(l));
      } else {
        encode_layer_rtn(l, gguf);
      }
      step(l + 1, std::string(quant_method_name(o.method)) + " layers");
    }
    return Status::ok();
  }

  // An empty result with the source's format, path, GGUF metadata and the working config.
  ModelFile result(const ModelFile& src) const {
    ModelFile out;
    out.format = src.format;
    out.path = src.path;
    out.config = fm.config();
    out.gguf = src.gguf;
    return out;
  }

  void add(ModelFile& out, const std::string& name, Encoded e) {
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(e.bytes));
    TensorView v{name, e.dtype, fm.shape(name), bytes->data(), bytes->size(), e.quant};
    report.bytes_after += v.nbytes;
    out.tensors[name] = std::move(v);
    out.storage.push_back(std::move(bytes));
  }

  // A 1-D tensor (norm) as F32.
  Encoded f32_vector(const std::string& name) {
    return encode_rows({fm.tensor(name), 1, static_cast<std::int64_t>(fm.tensor(name).size())}, DType::kF32);
  }

  // The result: linears as encoded, token_embd/output F16, everything else (norms) F32.
  ModelFile assemble(const ModelFile& src) {
    ModelFile out = result(src);
    for (const std::string& name : fm.names()) {
      Encoded e;
      if (auto it = linears.find(name); it != linears.end()) {
        e = std::move(it->second);
        ++report.tensors_quantized;
      } else if (fm.shape(name).size() == 2) {
        e = encode_rows(matrix(fm, name), DType::kF16);
      } else {
        e = f32_vector(name);
      }
      add(out, name, std::move(e));
    }
    return out;
  }

  // The result of a GGUF file type: every matrix in gguf_tensor_dtype's type, norms F32.
  Expected<ModelFile> assemble_gguf(const ModelFile& src, GgufFileType t) {
    ModelFile out = result(src);
    const std::vector<std::string> names = fm.names();
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      PEREGRINE_ASSIGN_OR_RETURN(const DType d, gguf_tensor_dtype(t, fm.config(), name, fm.shape(name)));
      if (fm.shape(name).size() == 2) {
        add(out, name, encode_rows(matrix(fm, name), d, &pool));
        if (is_ggml_block_dtype(d)) ++report.tensors_quantized;
      } else {
        add(out, name, f32_vector(name));
      }
      report.notes.push_back(name + ": " + std::string(dtype_name(d)));
      if (progress) progress(static_cast<std::int64_t>(i + 1), static_cast<std::int64_t>(names.size()), "tensors");
    }
    return out;
  }
};

}  // namespace

std::string_view quant_method_name(QuantMethod m) {
  for (const auto& [method, name] : kMethodNames) {
    if (method == m) return name;
  }
  return "?";
}

std::optional<QuantMethod> quant_method_from_name(std::string_view name) {
  for (const auto& [method, n] : kMethodNames) {
    if (n == name) return method;
  }
  return std::nullopt;
}

Status QuantizeOptions::validate() const {
  if (gguf_type && method != QuantMethod::kRtn) {
    return invalid_argument("--gguf-type " + std::string(gguf_file_type_name(*gguf_type)) + " is llama-quantize's round-to-nearest: use --method rtn (got " +
                            std::string(quant_method_name(method)) + ")");
  }
  if (gguf_type && (asymmetric || act_bits != 16)) {
    return invalid_argument("--gguf-type fixes the formats: --asym and --act-bits do not apply");
  }
  const bool int_method = method == QuantMethod::kRtn || method == QuantMethod::kGptq || method == QuantMethod::kAwq;
  if (int_method && bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    return invalid_argument("--bits " + std::to_string(bits) + " is not one of 2, 3, 4, 8");
  }
  if (!int_method && bits != 8) {
    return invalid_argument(std::string(quant_method_name(method)) + " quantizes to 8 bits (got --bits " + std::to_string(bits) + ")");
  }
  if (group < -1) return invalid_argument("--group " + std::to_string(group) + " must be -1 (per-channel), 0 (per-tensor) or positive");
  if (group == 0 && method != QuantMethod::kRtn && method != QuantMethod::kFp8) {
    return invalid_argument("--group 0 (per-tensor) is available for rtn and fp8 only");
  }
  if (group > 0 && (method == QuantMethod::kFp8 || method == QuantMethod::kSmoothQuant || method == QuantMethod::kLlmInt8)) {
    return invalid_argument(std::string(quant_method_name(method)) + " uses per-channel scales: --group must be -1" +
                            (method == QuantMethod::kFp8 ? " or 0" : ""));
  }
  if (act_bits != 8 && act_bits != 16) return invalid_argument("--act-bits must be 8 or 16");
  if (act_bits == 8 && method != QuantMethod::kRtn && method != QuantMethod::kGptq) {
    return invalid_argument("--act-bits 8 applies to rtn and gptq (smoothquant and llm-int8 always quantize activations)");
  }
  if (smooth && (method != QuantMethod::kGptq || act_bits != 8)) {
    return invalid_argument("--smooth applies to gptq with --act-bits 8 (smoothquant always smooths)");
  }
  if (act_order && method != QuantMethod::kGptq) return invalid_argument("--act-order applies to gptq only");
  if (asymmetric && !int_method) return invalid_argument("--asym applies to rtn, gptq and awq");
  if (fp8 != DType::kF8E4M3 && fp8 != DType::kF8E5M2) return invalid_argument("fp8 format must be e4m3 or e5m2");
  if (!(smooth_alpha >= 0.0f && smooth_alpha <= 1.0f)) return invalid_argument("--alpha must be in [0, 1]");
  if (!(outlier_threshold > 0.0f)) return invalid_argument("--outlier-threshold must be positive");
  if (!(damp_percent > 0.0 && damp_percent < 1.0)) return invalid_argument("--damp must be in (0, 1)");
  if (gguf_formats && !gguf_type && !gguf_dtype_for(*this)) {
    return invalid_argument("a GGUF file holds rtn --bits 8 or 4 --group 32 --sym (Q8_0 / Q4_0); use a folder for other formats");
  }
  if (needs_calibration() && (calib_tokens < 2 || calib_chunk < 2)) {
    return invalid_argument("--calib-tokens and the calibration chunk must be at least 2");
  }
  return Status::ok();
}

bool QuantizeOptions::needs_calibration() const {
  return method == QuantMethod::kGptq || method == QuantMethod::kAwq || method == QuantMethod::kSmoothQuant || smooth;
}

std::optional<DType> gguf_dtype_for(const QuantizeOptions& o) {
  if (o.method != QuantMethod::kRtn || o.group != 32 || o.asymmetric || o.act_bits != 16) return std::nullopt;
  if (o.bits == 8) return DType::kQ8_0;
  if (o.bits == 4) return DType::kQ4_0;
  return std::nullopt;
}

Expected<ModelFile> quantize_model(const ModelFile& src, const Tokenizer* tok, const QuantizeOptions& o,
                                   ThreadPool& pool, QuantizeReport* report, const QuantizeProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  for (const auto& [name, t] : src.tensors) {
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) {
      return unsupported("quantize: " + name + " is already " + t.format_string() +
                         " (re-quantizing compounds rounding errors; quantize the F32/F16/BF16 original)");
    }
  }
  if (src.config.n_experts > 0 && !o.gguf_type) {
    return unsupported("quantize: " + src.path + " is a Mixture-of-Experts model; quantize it with a GGUF file type "
                       "(--gguf-type, every expert on its own) — per-expert rtn / gptq / awq / smoothquant layouts are not supported yet");
  }
  QuantizeReport local;
  QuantizeReport& rep = report ? *report : local;
  rep.bytes_before = src.weight_bytes();
  PEREGRINE_ASSIGN_OR_RETURN(auto fm, FloatModel::from(src));
  Pipeline p{o, pool, rep, progress, std::move(fm), {}, {}};
  if (o.rotate_hadamard) PEREGRINE_RETURN_IF_ERROR(rotate_model_hadamard(p.fm, o.seed));
  if (o.needs_calibration()) {
    if (tok == nullptr || o.calib_path.empty()) {
      return invalid_argument(std::string(quant_method_name(o.method)) + " needs calibration text (--calib FILE)");
    }
    PEREGRINE_ASSIGN_OR_RETURN(p.chunks, calibration_chunks(*tok, o.calib_path, o.calib_tokens,
                                                            std::min(o.calib_chunk, src.config.max_seq_len)));
    for (const auto& c : p.chunks) rep.calib_tokens += static_cast<std::int64_t>(c.size());
  }
  if (o.gguf_type) return p.assemble_gguf(src, *o.gguf_type);
  PEREGRINE_RETURN_IF_ERROR(p.run(o.gguf_formats ? gguf_dtype_for(o) : std::nullopt));
  return p.assemble(src);
}

}  // namespace peregrine

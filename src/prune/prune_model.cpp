#include "peregrine/prune/prune_model.h"

#include <algorithm>
#include <memory>

#include "peregrine/model/llama_model.h"
#include "peregrine/prune/importance.h"
#include "peregrine/prune/layer_drop.h"
#include "peregrine/prune/sparsegpt.h"
#include "peregrine/prune/width_prune.h"
#include "peregrine/quant/calibration.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/float_model.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

constexpr LinearInput kInputs[] = {LinearInput::kAttention, LinearInput::kAttentionOutput, LinearInput::kFfn,
                                   LinearInput::kFfnDown};

constexpr std::pair<PruneMethod, std::string_view> kMethodNames[] = {
    {PruneMethod::kMagnitude, "magnitude"}, {PruneMethod::kWanda, "wanda"},   {PruneMethod::kSparseGpt, "sparsegpt"},
    {PruneMethod::kLayerDrop, "layer-drop"}, {PruneMethod::kWidth, "width"}};

bool unstructured(PruneMethod m) {
  return m == PruneMethod::kMagnitude || m == PruneMethod::kWanda || m == PruneMethod::kSparseGpt;
}

struct Linear {
  std::string name;
  std::span<float> w;
  std::int64_t rows, cols;
};

// An encoded tensor.
struct Encoded {
  DType dtype = DType::kF32;
  QuantParams quant;
  std::vector<std::uint8_t> bytes;
};

// The state the method steps share.
struct Pipeline {
  const PruneOptions& o;
  ThreadPool& pool;
  PruneReport& report;
  const QuantizeProgress& progress;
  FloatModel fm;
  std::vector<std::vector<std::int32_t>> chunks;
  std::map<std::string, Encoded> quantized;  // linears with kInt codes

  std::int64_t n_layers() const { return fm.config().n_layers; }

  Linear linear(std::int64_t l, const char* name) {
    const std::string full = layer_tensor_name(l, name);
    const auto& shape = fm.shape(full);
    return {full, fm.tensor(full), shape.front(), shape.back()};
  }

  QuantParams quant_params(std::int64_t cols) const {
    return QuantParams{o.quant_bits, std::min(quant_group(o.target), cols), false, 16, 0.0f};
  }

  Expected<LlamaModel> current_model() const { return LlamaModel::create(fm.view(), WeightPlacement::kInPlace); }

  Expected<std::vector<LayerStats>> stats(std::int64_t first, std::int64_t last, bool hessian) {
    PEREGRINE_ASSIGN_OR_RETURN(auto model, current_model());
    return calibrate(model, first, last, chunks, {hessian, 0}, pool);
  }

  std::optional<SequentialCalibration> sequential = std::nullopt;  // wanda, sparsegpt: the streams entering the current layer

  // The statistics of the layer `sequential` is at, on the current working copy.
  Expected<LayerStats> layer_stats(bool hessian) {
    if (!sequential) {
      PEREGRINE_ASSIGN_OR_RETURN(sequential, SequentialCalibration::start(chunks));
    }
    PEREGRINE_ASSIGN_OR_RETURN(auto model, current_model());
    return sequential->stats(model, {hessian, 0}, pool);
  }

  // Moves `sequential` past its layer, run with the layer's pruned weights.
  Status next_layer() {
    PEREGRINE_ASSIGN_OR_RETURN(auto model, current_model());
    return sequential->advance(model, pool);
  }

  // Magnitude and Wanda: the mask of `scores`, then RTN codes of the kept weights if asked.
  void prune_by_scores(const Linear& m, std::span<const float> scores, MaskScope scope) {
    apply_mask(m.w, select_mask(scores, m.rows, m.cols, o.target, scope));
    if (o.quant_bits == 0) return;
    const QuantParams p = quant_params(m.cols);
    Encoded e{DType::kInt, p, quantize_int_rtn(m.w, m.rows, m.cols, p)};
    const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(m.cols));
    for (std::int64_t r = 0; r < m.rows; ++r) {
      dequantize_int_row(p, e.bytes.data() + rb * static_cast<std::size_t>(r),
                         m.w.subspan(static_cast<std::size_t>(r * m.cols), static_cast<std::size_t>(m.cols)));
    }
    quantized[m.name] = std::move(e);
  }

  Status sparsegpt(const Linear& m, std::span<const double> hessian) {
    SparseGptOptions so{o.target, o.damp_percent, 128, std::nullopt};
    if (o.quant_bits != 0) so.quant = quant_params(m.cols);
    PEREGRINE_ASSIGN_OR_RETURN(auto r, sparsegpt_prune(m.w, m.rows, m.cols, hessian, so, &pool));
    std::copy(r.weights.begin(), r.weights.end(), m.w.begin());
    report.notes.push_back(m.name + ": sparsegpt loss " + std::to_string(r.loss));
    if (so.quant) quantized[m.name] = Encoded{DType::kInt, *so.quant, std::move(r.packed)};
    return Status::ok();
  }

  void note_tail(const Linear& m) {
    if (!o.target.nm() || m.cols % o.target.m == 0) return;
    report.notes.push_back(m.name + ": its last " + std::to_string(m.cols % o.target.m) + " of " + std::to_string(m.cols) +
                           " columns are not a whole " + std::to_string(o.target.m) + "-column group and stay dense");
  }

  Status prune_layer(std::int64_t l) {
    LayerStats stats;
    if (o.method != PruneMethod::kMagnitude) {
      PEREGRINE_ASSIGN_OR_RETURN(stats, layer_stats(o.method == PruneMethod::kSparseGpt));
    }
    for (LinearInput in : kInputs) {
      for (const char* name : linear_names(in)) {
        const Linear m = linear(l, name);
        note_tail(m);
        report.weights_before += m.rows * m.cols;
        if (o.method == PruneMethod::kMagnitude) {
          prune_by_scores(m, magnitude_scores(m.w), MaskScope::kPerTensor);
        } else if (o.method == PruneMethod::kWanda) {
          prune_by_scores(m, wanda_scores(m.w, stats[static_cast<std::size_t>(in)].l2_norm()), MaskScope::kPerRow);
        } else {
          PEREGRINE_RETURN_IF_ERROR(sparsegpt(m, stats[static_cast<std::size_t>(in)].hessian()));
        }
        report.weights_zero += std::count(m.w.begin(), m.w.end(), 0.0f);
        ++report.tensors_pruned;
        report.pruned_linears.push_back(m.name);
      }
    }
    return o.method == PruneMethod::kMagnitude ? Status::ok() : next_layer();
  }

  Status layer_drop() {
    PEREGRINE_ASSIGN_OR_RETURN(auto model, current_model());
    PEREGRINE_ASSIGN_OR_RETURN(auto distances, block_distances(model, chunks, o.drop_layers, pool));
    const auto best = std::min_element(distances.begin(), distances.end()) - distances.begin();
    for (std::size_t l = 0; l < distances.size(); ++l) {
      report.notes.push_back("blocks " + std::to_string(l) + ".." + std::to_string(l + static_cast<std::size_t>(o.drop_layers) - 1) +
                             ": angular distance " + std::to_string(distances[l]));
    }
    report.notes.push_back("dropped blocks " + std::to_string(best) + ".." + std::to_string(best + o.drop_layers - 1));
    report.tensors_pruned = o.drop_layers;
    drop_blocks(fm, best, o.drop_layers);
    return Status::ok();
  }

  Status width() {
    PEREGRINE_ASSIGN_OR_RETURN(auto all, stats(0, n_layers() - 1, false));
    PEREGRINE_ASSIGN_OR_RETURN(const WidthPlan plan, choose_width(fm, all, o.ffn_keep, o.heads_keep));
    report.notes.push_back("kept " + std::to_string(plan.ffn_channels.front().size()) + " of " + std::to_string(fm.config().ffn_dim) +
                           " FFN channels and " + std::to_string(plan.kv_heads.front().size()) + " of " +
                           std::to_string(fm.config().n_kv_heads) + " KV head groups per layer");
    PEREGRINE_RETURN_IF_ERROR(apply_width(fm, plan));
    report.tensors_pruned = n_layers();
    return Status::ok();
  }

  Status run() {
    if (o.method == PruneMethod::kLayerDrop) return layer_drop();
    if (o.method == PruneMethod::kWidth) return width();
    for (std::int64_t l = 0; l < n_layers(); ++l) {
      PEREGRINE_RETURN_IF_ERROR(prune_layer(l));
      if (progress) progress(l + 1, n_layers(), std::string(prune_method_name(o.method)) + " layers");
    }
    return Status::ok();
  }

  // Every tensor: a quantized linear as its codes, the others in their source dtype.
  ModelFile assemble(const ModelFile& src) {
    ModelFile out;
    out.format = src.format;
    out.path = src.path;
    out.config = fm.config();
    out.gguf = src.gguf;
    for (const std::string& name : fm.names()) {
      Encoded e;
      if (auto it = quantized.find(name); it != quantized.end()) {
        e = std::move(it->second);
      } else {
        e = encode_as(name, src.tensors.at(name).dtype);
      }
      auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(e.bytes));
      TensorView v{name, e.dtype, fm.shape(name), bytes->data(), bytes->size(), e.quant};
      report.bytes_after += v.nbytes;
      out.tensors[name] = std::move(v);
      out.storage.push_back(std::move(bytes));
    }
    return out;
  }

  // A float tensor re-encoded in dtype t (F32, F16, BF16: the source's values come back exactly
  // when they were not changed).
  Encoded encode_as(const std::string& name, DType t) const {
    const auto values = fm.tensor(name);
    const std::int64_t cols = fm.shape(name).back(), rows = static_cast<std::int64_t>(values.size()) / cols;
    const std::size_t rb = *dtype_row_bytes(t, static_cast<std::uint64_t>(cols));
    Encoded e{t, {}, std::vector<std::uint8_t>(rb * static_cast<std::size_t>(rows))};
    for (std::int64_t r = 0; r < rows; ++r) {
      quantize_rtn(t, values.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)),
                   e.bytes.data() + rb * static_cast<std::size_t>(r));
    }
    return e;
  }
};

Status check_source(const ModelFile& src) {
  for (const auto& [name, t] : src.tensors) {
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) {
      return unsupported("prune: " + name + " is already " + t.format_string() +
                         " (prune the F32/F16/BF16 original; --quantize quantizes the pruned weights in the same pass)");
    }
  }
  if (src.config.n_experts > 0) {
    return unsupported("prune: " + src.path + " is a Mixture-of-Experts model; pruning its experts is not supported yet");
  }
  return Status::ok();
}

// Calibration chunks holding o.calib_tokens tokens of the text.
Expected<std::vector<std::vector<std::int32_t>>> chunks_of(const Tokenizer* tok, const PruneOptions& o, const ModelConfig& c) {
  if (tok == nullptr || o.calib_path.empty()) {
    return invalid_argument(std::string(prune_method_name(o.method)) + " needs calibration text (--calib FILE)");
  }
  const std::int64_t chunk = std::min(o.calib_chunk, c.max_seq_len);
  PEREGRINE_ASSIGN_OR_RETURN(auto chunks, calibration_chunks(*tok, o.calib_path, o.calib_tokens, chunk));
  std::int64_t text_tokens = 0;  // without the BOS each later chunk starts with
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    text_tokens += static_cast<std::int64_t>(chunks[i].size()) - (i > 0 && tok->bos_id() >= 0 ? 1 : 0);
  }
  if (text_tokens < o.calib_tokens) {
    return invalid_argument("calibration text " + o.calib_path + " holds " + std::to_string(text_tokens) +
                            " tokens, fewer than --calib-tokens " + std::to_string(o.calib_tokens) +
                            " (give a longer text or a smaller --calib-tokens)");
  }
  return chunks;
}

}  // namespace

std::string_view prune_method_name(PruneMethod m) {
  for (const auto& [method, name] : kMethodNames) {
    if (method == m) return name;
  }
  return "?";
}

std::optional<PruneMethod> prune_method_from_name(std::string_view name) {
  for (const auto& [method, n] : kMethodNames) {
    if (n == name) return method;
  }
  return std::nullopt;
}

std::int64_t quant_group(const SparsityTarget& t) {
  if (!t.nm()) return 32;
  return static_cast<std::int64_t>(t.m) * ((32 + t.n - 1) / t.n);
}

Status PruneOptions::validate() const {
  if (unstructured(method)) PEREGRINE_RETURN_IF_ERROR(target.validate());
  if (quant_bits != 0 && quant_bits != 4 && quant_bits != 8) {
    return invalid_argument("--quantize gives 4 or 8 bits (q4, q8), got " + std::to_string(quant_bits));
  }
  if (quant_bits != 0 && !unstructured(method)) {
    return invalid_argument("--quantize applies to magnitude, wanda and sparsegpt (" + std::string(prune_method_name(method)) +
                            " writes a smaller dense model: quantize it afterwards)");
  }
  if (method == PruneMethod::kLayerDrop && drop_layers < 1) return invalid_argument("layer-drop needs --drop N with N >= 1");
  if (method == PruneMethod::kWidth) {
    if (!(ffn_keep > 0.0 && ffn_keep <= 1.0)) return invalid_argument("--ffn-keep must be in (0, 1]");
    if (!(heads_keep > 0.0 && heads_keep <= 1.0)) return invalid_argument("--heads-keep must be in (0, 1]");
    if (ffn_keep == 1.0 && heads_keep == 1.0) return invalid_argument("width pruning needs --ffn-keep or --heads-keep below 1");
  }
  if (!(damp_percent > 0.0 && damp_percent < 1.0)) return invalid_argument("--damp must be in (0, 1)");
  if (needs_calibration() && (calib_tokens < 2 || calib_chunk < 2)) {
    return invalid_argument("--calib-tokens and --calib-chunk must be at least 2");
  }
  return Status::ok();
}

bool PruneOptions::needs_calibration() const { return method != PruneMethod::kMagnitude; }

Expected<ModelFile> prune_model(const ModelFile& src, const Tokenizer* tok, const PruneOptions& o, ThreadPool& pool,
                                PruneReport* report, const QuantizeProgress& progress) {
  PEREGRINE_RETURN_IF_ERROR(o.validate());
  PEREGRINE_RETURN_IF_ERROR(check_source(src));
  if (o.method == PruneMethod::kLayerDrop && o.drop_layers >= src.config.n_layers) {
    return invalid_argument("layer-drop --drop " + std::to_string(o.drop_layers) + " must leave at least one of the model's " +
                            std::to_string(src.config.n_layers) + " layers");
  }
  const std::int64_t period = src.config.sliding_window_period;
  if (o.method == PruneMethod::kLayerDrop && period > 0 && o.drop_layers % period != 0) {
    return unsupported("layer-drop: " + src.path + " alternates local and global attention every " + std::to_string(period) +
                       " layers; drop a multiple of " + std::to_string(period) + " so the later layers keep their kind");
  }
  PruneReport local;
  PruneReport& rep = report ? *report : local;
  rep.bytes_before = src.weight_bytes();
  PEREGRINE_ASSIGN_OR_RETURN(auto fm, FloatModel::from(src));
  Pipeline p{o, pool, rep, progress, std::move(fm), {}, {}};
  if (o.needs_calibration()) {
    PEREGRINE_ASSIGN_OR_RETURN(p.chunks, chunks_of(tok, o, src.config));
    for (const auto& c : p.chunks) rep.calib_tokens += static_cast<std::int64_t>(c.size());
  }
  PEREGRINE_RETURN_IF_ERROR(p.run());
  return p.assemble(src);
}

}  // namespace peregrine

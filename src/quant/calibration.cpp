#include "peregrine/quant/calibration.h"

#include <algorithm>
#include <cmath>

// GCC 12 flags Eigen's AVX-512 GEMM kernels (an _mm512_undefined operand) as (maybe-)uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>

#include "peregrine/core/text_file.h"
#include "peregrine/kv/kv_cache.h"

namespace peregrine {
namespace {

// Accumulates the inputs of layers [first, last] into InputStats.
class StatsObserver final : public ActivationObserver {
 public:
  StatsObserver(std::int64_t first, std::int64_t last, const CalibrationOptions& o)
      : first_(first), o_(o), stats_(static_cast<std::size_t>(last - first + 1)) {}

  void observe(std::int64_t layer, LinearInput input, std::span<const float> x, std::int64_t n_rows) override {
    if (layer < first_ || layer >= first_ + static_cast<std::int64_t>(stats_.size())) return;
    InputStats& s = stats_[static_cast<std::size_t>(layer - first_)][static_cast<std::size_t>(input)];
    const std::int64_t width = static_cast<std::int64_t>(x.size()) / n_rows;
    if (s.width == 0) init(s, width);
    for (std::int64_t t = 0; t < n_rows; ++t) add_row(s, x.subspan(static_cast<std::size_t>(t * width), static_cast<std::size_t>(width)));
    if (o_.hessian) add_gram(s, x, n_rows);
  }

  std::vector<LayerStats> take() { return std::move(stats_); }

 private:
  void init(InputStats& s, std::int64_t width) const {
    s.width = width;
    s.abs_max.assign(static_cast<std::size_t>(width), 0.0f);
    s.abs_sum.assign(static_cast<std::size_t>(width), 0.0);
    s.sq_sum.assign(static_cast<std::size_t>(width), 0.0);
    if (o_.hessian) s.xtx.assign(static_cast<std::size_t>(width * width), 0.0);
  }

  void add_row(InputStats& s, std::span<const float> x) const {
    const auto w = static_cast<std::size_t>(s.width);
    for (std::size_t j = 0; j < w; ++j) {
      s.abs_max[j] = std::max(s.abs_max[j], std::fabs(x[j]));
      s.abs_sum[j] += std::fabs(x[j]);
      s.sq_sum[j] += static_cast<double>(x[j]) * x[j];
    }
    if (s.sample_rows() < o_.max_sample_rows) s.sample.insert(s.sample.end(), x.begin(), x.end());
    ++s.n_rows;
  }

  /// xtx's lower triangle += Xᵀ X for the rows x [n_rows, width] (Eigen's blocked rank-k
  /// update, in f64; hessian() mirrors the triangle).
  static void add_gram(InputStats& s, std::span<const float> x, std::int64_t n_rows) {
    using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const std::vector<double> x64(x.begin(), x.end());
    const Eigen::Map<const RowMajor> rows(x64.data(), n_rows, s.width);
    Eigen::Map<RowMajor> xtx(s.xtx.data(), s.width, s.width);
    xtx.selfadjointView<Eigen::Lower>().rankUpdate(rows.transpose());
  }

  std::int64_t first_;
  CalibrationOptions o_;
  std::vector<LayerStats> stats_;
};

}  // namespace

std::vector<float> InputStats::abs_mean() const {
  std::vector<float> out(abs_sum.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(abs_sum[j] / static_cast<double>(std::max<std::int64_t>(n_rows, 1)));
  return out;
}

std::vector<float> InputStats::l2_norm() const {
  std::vector<float> out(sq_sum.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(std::sqrt(sq_sum[j]));
  return out;
}

std::vector<double> InputStats::hessian() const {
  std::vector<double> h(xtx.size());
  const double f = 2.0 / static_cast<double>(std::max<std::int64_t>(n_rows, 1));
  const auto w = static_cast<std::size_t>(width);
  for (std::size_t i = 0; i < w; ++i) {
    for (std::size_t j = 0; j <= i; ++j) h[i * w + j] = h[j * w + i] = xtx[i * w + j] * f;  // the lower triangle, mirrored
  }
  return h;
}

Status observe_chunks(const LlamaModel& model, std::span<const std::vector<std::int32_t>> chunks, ActivationObserver& observer,
                      std::int64_t n_layers, ThreadPool& pool) {
  if (chunks.empty()) return invalid_argument("calibrate: no calibration chunks");
  std::vector<float> logits;
  for (const auto& chunk : chunks) {
    if (chunk.empty()) return invalid_argument("calibrate: an empty calibration chunk");
    const auto n = static_cast<std::int64_t>(chunk.size());
    PEREGRINE_ASSIGN_OR_RETURN(
        auto cache, KvCache::create(model.config().kv_shape(), {static_cast<std::int32_t>(blocks_for_tokens(n, kDefaultKvBlockSize)),
                                                     kDefaultKvBlockSize, DType::kF32}));
    Batch batch;
    for (std::int64_t i = 0; i < n; ++i) batch.add(chunk[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, i == n - 1);
    PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool, n_layers, &observer));
  }
  return Status::ok();
}

Expected<std::vector<LayerStats>> calibrate(const LlamaModel& model, std::int64_t first_layer, std::int64_t last_layer,
                                            std::span<const std::vector<std::int32_t>> chunks,
                                            const CalibrationOptions& o, ThreadPool& pool) {
  const std::int64_t n_layers = model.config().n_layers;
  if (first_layer < 0 || last_layer < first_layer || last_layer >= n_layers) {
    return invalid_argument("calibrate: layers [" + std::to_string(first_layer) + ", " + std::to_string(last_layer) +
                            "] are outside [0, " + std::to_string(n_layers) + ")");
  }
  StatsObserver observer(first_layer, last_layer, o);
  PEREGRINE_RETURN_IF_ERROR(observe_chunks(model, chunks, observer, last_layer + 1, pool));
  return observer.take();
}

Expected<SequentialCalibration> SequentialCalibration::start(std::vector<std::vector<std::int32_t>> chunks) {
  if (chunks.empty()) return invalid_argument("calibrate: no calibration chunks");
  for (const auto& chunk : chunks) {
    if (chunk.empty()) return invalid_argument("calibrate: an empty calibration chunk");
  }
  return SequentialCalibration(std::move(chunks));
}

Status SequentialCalibration::run_layer(const LlamaModel& model, ActivationObserver* observer, bool keep, ThreadPool& pool) {
  const std::int64_t dim = model.config().dim;
  hidden_.resize(chunks_.size());
  std::vector<float> x;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto n = static_cast<std::int64_t>(chunks_[c].size());
    PEREGRINE_ASSIGN_OR_RETURN(auto cache, KvCache::create(model.config().kv_shape(),
                                                           {static_cast<std::int32_t>(blocks_for_tokens(n, kDefaultKvBlockSize)),
                                                            kDefaultKvBlockSize, DType::kF32}));
    Batch batch;
    for (std::int64_t i = 0; i < n; ++i) batch.add(chunks_[c][static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, false);
    x = layer_ == 0 ? std::vector<float>(static_cast<std::size_t>(n * dim)) : hidden_[c];
    PEREGRINE_RETURN_IF_ERROR(model.forward_layers(batch, cache, x, layer_, layer_ + 1, pool, observer));
    if (keep) hidden_[c] = std::move(x);
  }
  return Status::ok();
}

Expected<LayerStats> SequentialCalibration::stats(const LlamaModel& model, const CalibrationOptions& o, ThreadPool& pool) {
  StatsObserver observer(layer_, layer_, o);
  PEREGRINE_RETURN_IF_ERROR(run_layer(model, &observer, false, pool));
  return std::move(observer.take().front());
}

Status SequentialCalibration::advance(const LlamaModel& model, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(run_layer(model, nullptr, true, pool));
  ++layer_;
  return Status::ok();
}

Expected<std::vector<std::vector<std::int32_t>>> calibration_chunks(const Tokenizer& tok, const std::string& path,
                                                                    std::int64_t n_tokens, std::int64_t chunk_len) {
  if (n_tokens < 2 || chunk_len < 2) {
    return invalid_argument("calibration: --calib-tokens and the chunk length must be at least 2");
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto text, read_text_file(path));
  std::vector<std::int32_t> tokens = tok.encode(text, true);
  if (tokens.size() < 2) return invalid_argument("calibration text " + path + " has fewer than 2 tokens");
  tokens.resize(std::min(tokens.size(), static_cast<std::size_t>(n_tokens)));
  std::vector<std::vector<std::int32_t>> chunks;
  std::size_t pos = 0;
  while (pos < tokens.size()) {
    std::vector<std::int32_t> chunk;
    if (pos > 0 && tok.bos_id() >= 0) chunk.push_back(tok.bos_id());
    const std::size_t take = std::min(tokens.size() - pos, static_cast<std::size_t>(chunk_len) - chunk.size());
    chunk.insert(chunk.end(), tokens.begin() + static_cast<std::ptrdiff_t>(pos), tokens.begin() + static_cast<std::ptrdiff_t>(pos + take));
    pos += take;
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

}  // namespace peregrine

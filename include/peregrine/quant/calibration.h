// Calibration: statistics of the inputs of a decoder layer's linear layers on real text, the data
// GPTQ and SparseGPT (Hessians), AWQ (mean |x| and a sample), SmoothQuant (max |x|), Wanda (‖x_j‖₂)
// and LLM.int8() read.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/activation_observer.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

/// Statistics of one linear input (x rows of `width` values) over the calibration tokens.
struct InputStats {
  std::int64_t width = 0;
  std::int64_t n_rows = 0;
  std::vector<double> xtx;       // [width, width] Σ_t x_t x_tᵀ, its lower triangle (j <= i) only (empty unless requested)
  std::vector<float> abs_max;    // [width] max_t |x_tj|
  std::vector<double> abs_sum;   // [width] Σ_t |x_tj|
  std::vector<double> sq_sum;    // [width] Σ_t x_tj²
  std::vector<float> sample;     // [sample_rows(), width]: the first rows seen, in order

  std::int64_t sample_rows() const { return width == 0 ? 0 : static_cast<std::int64_t>(sample.size()) / width; }
  /// [width] Σ|x| / n_rows (AWQ's activation salience).
  std::vector<float> abs_mean() const;
  /// [width] ‖X_j‖₂ = sqrt(Σ_t x_tj²) (Wanda's input-feature norm, Sun et al. 2024).
  std::vector<float> l2_norm() const;
  /// [width, width] H = (2 / n_rows) Σ x xᵀ (GPTQ's Hessian of ||W X − Ŵ X||²).
  std::vector<double> hessian() const;
};

/// The four inputs of one decoder layer, indexed by static_cast<int>(LinearInput).
using LayerStats = std::array<InputStats, 4>;

struct CalibrationOptions {
  bool hessian = false;               // accumulate xtx (width² doubles per input)
  std::int64_t max_sample_rows = 512; // rows kept in InputStats::sample
};

/// Runs `model` over each chunk (a fresh single-sequence f32 KV cache per chunk, its first
/// `n_layers` layers) showing `observer` every linear input and hidden state on the way.
/// Errors: kInvalidArgument (no chunks, an empty chunk), the forward's errors (e.g. a chunk
/// longer than the context).
Status observe_chunks(const LlamaModel& model, std::span<const std::vector<std::int32_t>> chunks, ActivationObserver& observer,
                      std::int64_t n_layers, ThreadPool& pool);

/// Runs `model` over each chunk (a fresh single-sequence f32 KV cache per chunk, layers
/// [0, last_layer]) and returns the statistics of layers [first_layer, last_layer] (one
/// LayerStats per layer, in order). Errors: kInvalidArgument (no chunks, an empty chunk, a layer
/// range outside [0, n_layers)), the forward's errors (e.g. a chunk longer than the context).
Expected<std::vector<LayerStats>> calibrate(const LlamaModel& model, std::int64_t first_layer,
                                            std::int64_t last_layer,
                                            std::span<const std::vector<std::int32_t>> chunks,
                                            const CalibrationOptions& o, ThreadPool& pool);

/// Layer-by-layer calibration of the sequential methods (GPTQ, AWQ, SparseGPT, Wanda): each
/// chunk's residual stream is kept at the input of the current layer, so that a layer's
/// statistics cost one layer's forward over the chunks (and moving on, one more) instead of a
/// forward through every layer before it. As before, layer l's statistics see layers < l as
/// they were when advance() ran them (already compressed) and layer l as it is now.
class SequentialCalibration {
 public:
  /// Starts at layer 0 over `chunks` (each non-empty, at most the context).
  /// Errors: kInvalidArgument (no chunks, an empty chunk).
  static Expected<SequentialCalibration> start(std::vector<std::vector<std::int32_t>> chunks);

  /// The layer whose inputs stats() observes next.
  std::int64_t layer() const { return layer_; }

  /// The statistics of layer layer() of `model` (same shape as the model calibration started
  /// with; its weights as they are now). Errors: forward_layers's.
  Expected<LayerStats> stats(const LlamaModel& model, const CalibrationOptions& o, ThreadPool& pool);

  /// Runs layer layer() of `model` (its final weights) on the kept streams and moves to the next
  /// layer. Errors: forward_layers's.
  Status advance(const LlamaModel& model, ThreadPool& pool);

 private:
  explicit SequentialCalibration(std::vector<std::vector<std::int32_t>> chunks) : chunks_(std::move(chunks)) {}
  /// Layer layer() of `model` over every chunk, the streams updated when `keep` (observer may be null).
  Status run_layer(const LlamaModel& model, ActivationObserver* observer, bool keep, ThreadPool& pool);

  std::vector<std::vector<std::int32_t>> chunks_;
  std::vector<std::vector<float>> hidden_;  // per chunk [tokens, dim]: the stream entering layer_
  std::int64_t layer_ = 0;
};

/// Calibration token chunks from a text file: the file is tokenized (with BOS) as one text, the
/// first `n_tokens` tokens are kept and cut into chunks of at most `chunk_len` tokens, each
/// after the first starting with BOS (so every chunk is a valid prompt).
/// Errors: kNotFound / kIo (file), kInvalidArgument (n_tokens < 2, chunk_len < 2, a text with
/// fewer than 2 tokens).
Expected<std::vector<std::vector<std::int32_t>>> calibration_chunks(const Tokenizer& tok, const std::string& path,
                                                                    std::int64_t n_tokens, std::int64_t chunk_len);

}  // namespace peregrine

// The configurations a quality-vs-compute sweep (`peregrine pareto`) can run on one model: every
// compression technique of the seeds at its usual settings, each a recipe applied to the model
// dequantized to F32 (the reference). Seeds 002 / 004 (quantization: GGUF K-quant mixes, RTN,
// GPTQ, AWQ, SmoothQuant, LLM.int8(), FP8), 005 (pruning: magnitude, Wanda, SparseGPT, N:M,
// layer-drop, width) and the KV-cache element types of kv/kv_cache.h.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/prune/prune_model.h"
#include "peregrine/quant/quantize_model.h"

namespace peregrine {

/// How a configuration changes the reference model.
enum class ParetoRecipe : std::uint8_t {
  kReference,  // the F32 model itself
  kQuantize,   // quantize_model(quant)
  kPrune,      // prune_model(prune), stored as gguf_storage (N:M sparse kernels for 2:4)
  kLayerDrop,  // prune_model(layer-drop) of drop_fraction of the blocks
};

/// One point of the sweep.
struct ParetoConfig {
  std::string name;       // "gptq-w4-g32", unique; what --configs lists
  std::string technique;  // the plot's colour group: "float", "gguf", "int", "w8a8", "fp8", "prune", "kv"
  std::string describe;   // one line for --list and the tables
  ParetoRecipe recipe = ParetoRecipe::kReference;
  QuantizeOptions quant;      // kQuantize
  PruneOptions prune;         // kPrune, kLayerDrop (calibration text set by the sweep)
  double drop_fraction = 0;   // kLayerDrop: share of the blocks removed (rounded, at least 1)
  DType kv_type = DType::kF32;  // the KV cache's element type in evaluation and timing
  /// Whether building it reads calibration text (GPTQ, AWQ, SmoothQuant, Wanda, SparseGPT, layer-drop).
  bool needs_calibration() const;
  /// Build cost in evaluations of the reference, for the time estimate: 0 for recipes without
  /// calibration, 3 to 14 for calibrated ones (AWQ's search the most; a prior measured on
  /// SmolLM2-135M, the progress lines then rescale it by the times measured).
  double build_cost() const;
};

/// Every configuration, in the order a sweep runs them (reference first).
std::span<const ParetoConfig> pareto_catalogue();

/// The configurations a --configs value selects: "all", "quick" (those built without
/// calibration: float, GGUF mixes, RTN, LLM.int8(), FP8, KV types), or comma-separated names; the reference is always
/// included, first. Errors: kInvalidArgument naming an unknown name and listing the known ones.
Expected<std::vector<ParetoConfig>> select_pareto_configs(std::string_view list);

}  // namespace peregrine

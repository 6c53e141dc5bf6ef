// The pruning pipeline behind `peregrine prune`: a model in, the same model with its
// decoder-layer linears (attn_q/k/v/output, ffn_gate/up/down) pruned out — or, for the structured
// methods, a smaller dense model. Embedding, LM head and norms are kept as they are.
//
// Methods (seed 003 "Unstructured Pruning / Sparsity" and "Sheared LLaMA"):
//   magnitude   |W| (Janowsky 1989; Han et al. 2015), compared over the whole matrix (per layer,
//               as the Wanda paper's magnitude baseline) or per N:M group
//   wanda       |W_ij| · ‖X_j‖₂ compared per output row (Sun et al., ICLR 2024), no weight update
//   sparsegpt   OBS reconstruction with the inverse Hessian (Frantar & Alistarh 2023,
//               prune/sparsegpt.h), optionally quantizing the kept weights in the same pass
//   layer-drop  removes the N consecutive blocks whose input and output hidden states are
//               closest in angular distance (Gromov et al. 2024, "The Unreasonable Ineffectiveness
//               of the Deeper Layers"), prune/layer_drop.h
//   width       keeps the most important FFN channels and attention heads (KV groups) by
//               activation × weight importance (LLM-Pruner / Sheared LLaMA's masks, without the
//               retraining), prune/width_prune.h
// Wanda and SparseGPT run layer by layer: layer l is calibrated on the model whose layers < l are
// already pruned (as the reference implementations and quant/gptq.h do).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/prune/sparsity.h"
#include "peregrine/quant/quantize_model.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

enum class PruneMethod : std::uint8_t { kMagnitude, kWanda, kSparseGpt, kLayerDrop, kWidth };

/// "magnitude", "wanda", "sparsegpt", "layer-drop", "width".
std::string_view prune_method_name(PruneMethod m);
/// Inverse of prune_method_name; nullopt if unknown.
std::optional<PruneMethod> prune_method_from_name(std::string_view name);

struct PruneOptions {
  PruneMethod method = PruneMethod::kMagnitude;
  SparsityTarget target;            // magnitude, wanda, sparsegpt
  int quant_bits = 0;               // 0: none; 4 or 8: the kept weights as symmetric kInt codes
                                    // (sparsegpt: jointly; magnitude / wanda: RTN after pruning),
                                    // group quant_group(target) columns
  double damp_percent = 0.01;       // sparsegpt dampening
  std::string calib_path;           // calibration text (wanda, sparsegpt, layer-drop, width)
  std::int64_t calib_tokens = 1024; // tokens of calibration text used (the text must hold them)
  std::int64_t calib_chunk = 256;   // tokens per calibration forward (capped at the context)
  std::int64_t drop_layers = 0;     // layer-drop: blocks removed, in [1, n_layers)
  double ffn_keep = 1.0;            // width: fraction of FFN channels kept, (0, 1]
  double heads_keep = 1.0;          // width: fraction of KV head groups kept, (0, 1]

  /// Validates the combination. Errors: kInvalidArgument naming the option.
  Status validate() const;
  /// Whether the method reads calibration text.
  bool needs_calibration() const;
};

/// Columns per quantization group of a target: 32 kept weights' worth — 32 for unstructured
/// targets, m · ceil(32 / n) for N:M (64 for 2:4 and 4:8), so a sparse block of 32 kept values
/// shares one scale.
std::int64_t quant_group(const SparsityTarget& t);

/// What prune_model did, for the CLI's summary.
struct PruneReport {
  std::int64_t tensors_pruned = 0;
  std::vector<std::string> pruned_linears;            // names of the linears pruned weight by weight
  std::int64_t weights_before = 0, weights_zero = 0;  // over the pruned linears
  std::size_t bytes_before = 0, bytes_after = 0;      // all tensors, as held in memory
  std::int64_t calib_tokens = 0;
  std::vector<std::string> notes;  // per-layer details (losses, dropped layers, kept channels)
};

/// Prunes `src` (every tensor F32/F16/BF16: decoded to f32 first) with `o`. `tok` tokenizes the
/// calibration text (needed when o.needs_calibration()). The result owns its tensors: pruned
/// linears dense in their source dtype (zeros where pruned) or, with quant_bits, kInt
/// {bits, quant_group, symmetric}; every other tensor as in the source. Structured methods return
/// a config with fewer layers / a narrower FFN / fewer heads and only the tensors that remain.
/// Errors: o.validate()'s; kUnsupported (a tensor already quantized — prune the F32/F16/BF16
/// original; a Mixture-of-Experts model; width pruning of a family with whole-projection Q/K
/// norms); kInvalidArgument (no calibration text / tokenizer when needed, a text with fewer than
/// calib_tokens tokens, layer-drop of as many layers as the model has); calibration and
/// SparseGPT errors. An N:M pattern whose m does not divide a linear's columns leaves the last
/// cols % m columns of its rows dense (a line in the report's notes).
Expected<ModelFile> prune_model(const ModelFile& src, const Tokenizer* tok, const PruneOptions& o, ThreadPool& pool,
                                PruneReport* report = nullptr, const QuantizeProgress& progress = {});

}  // namespace peregrine

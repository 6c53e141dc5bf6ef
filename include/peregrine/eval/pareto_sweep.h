// One point of a quality-vs-compute sweep (`peregrine pareto`): build a configuration of the
// model (eval/pareto_configs.h) from its F32 reference, measure its quality against the kept
// reference logits (KL divergence, top-1 agreement, perplexity) and its speed (one sequence's
// decode and one prompt's prefill, tools/engine_bench.h), all in this process on this machine.
#pragma once

#include <span>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/eval/logit_comparison.h"
#include "peregrine/eval/pareto_configs.h"
#include "peregrine/eval/pareto_front.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "peregrine/tools/engine_bench.h"

namespace peregrine {

/// What every point of one sweep shares.
struct ParetoSweep {
  const ModelFile& reference_file;         // the model with every matrix F32 (convert_model_weights)
  const LlamaModel& reference;             // built from reference_file
  const ReferenceLogits& reference_logits;  // reference's logits over `tokens`
  std::span<const std::int32_t> tokens;    // the evaluation text's tokens
  const Tokenizer& tokenizer;              // reads the calibration text
  std::string calib_path;                  // calibration text, apart from the evaluation text
  BenchParams bench;                       // pp / tg sizes and repetitions (kv_type: the config's)
  bool reference_in_place = false;         // `reference` reads its weights in place (its points say so)
};

/// The model file of `c`: the reference's own (kReference), quantize_model's, prune_model's
/// stored as gguf_storage (N:M sparse dtypes for 2:4), or layer-drop's with
/// max(1, round(drop_fraction · n_layers)) blocks removed.
/// Errors: those of quantize_model, prune_model and gguf_storage.
Expected<ModelFile> build_pareto_model(const ParetoSweep& s, const ParetoConfig& c, ThreadPool& pool);

/// Builds, evaluates and times `c`. Errors: build_pareto_model's, LlamaModel::create's,
/// compare_logits's and run_bench's.
Expected<ParetoPoint> measure_pareto_point(const ParetoSweep& s, const ParetoConfig& c, ThreadPool& pool);

}  // namespace peregrine

// A real model (../shared/models) with its tokenizer and held-out evaluation text, and the mean KL
// divergence of a candidate (quantized, pruned) model against it: the quality figure the
// quantization and pruning acceptance tests compare.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "peregrine/formats/model_file.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::test {

struct RealModel {
  ModelFile file;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<LlamaModel> f32;
  std::vector<std::int32_t> eval_tokens;  // all of tinystories_valid_excerpt.txt, with BOS
};

/// Loads ../shared/models/`rel` (e.g. "stories260K/stories260K.bin"), its tokenizer and the
/// evaluation tokens; fails the calling test (EXPECT) when something cannot be loaded.
RealModel load_real_model(const std::string& rel);

/// Mean KL(reference || candidate) in nats over the first `max_windows` (default: all)
/// consecutive windows of min(256, context) evaluation tokens (eval/logit_comparison.h).
/// Returns 1e9 and fails the calling test when the candidate cannot be built or run.
double mean_kld(const RealModel& m, ModelFile candidate, std::int64_t max_windows = -1);

/// ../shared/data/tinystories/tinystories_sample.txt, the calibration text (kept apart from the
/// evaluation text).
std::string calibration_text_path();

}  // namespace peregrine::test

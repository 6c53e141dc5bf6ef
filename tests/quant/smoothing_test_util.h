// Shared by the smoothing / rotation / AWQ tests: the two real 260K models as FloatModels, a
// real TinyStories prompt in each model's tokens, their teacher-forced logits, and the linear
// inputs a forward shows an ActivationObserver.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "peregrine/core/thread_pool.h"
#include "peregrine/model/activation_observer.h"
#include "peregrine/quant/float_model.h"

namespace peregrine::test {

/// ../shared/models/stories260K/stories260K.bin (5 layers, 8 heads / 4 KV heads: GQA, tied head).
std::string stories260k_bin();
/// ../shared/models/aidreams260K/aidreams260K.bin (4 layers, 4 heads / 4 KV heads: MHA).
std::string aidreams260k_bin();

/// The model at `path` decoded to f32; fails the calling test (and returns an empty model) if it
/// cannot be loaded.
FloatModel load_float_model(const std::string& path);

/// The TinyStories sample encoded with the model's own tokenizer (BOS first), cut to the
/// model's context.
std::vector<std::int32_t> story_tokens(const FloatModel& m);

/// Teacher-forced logits [tokens.size(), vocab] of a LlamaModel built from m.view().
std::vector<float> model_logits(const FloatModel& m, std::span<const std::int32_t> tokens, ThreadPool& pool);

/// max |a_i − b_i| / max |a_i|: the logit change relative to the logits' scale.
double max_relative_diff(std::span<const float> a, std::span<const float> b);

/// Every activation a forward shows, per (layer, input): x [rows, width] f32.
struct Activations {
  std::int64_t width = 0;
  std::vector<float> x;
  std::int64_t rows() const { return width == 0 ? 0 : static_cast<std::int64_t>(x.size()) / width; }
};
using ActivationMap = std::map<std::pair<std::int64_t, LinearInput>, Activations>;

/// The linear inputs of one prefill forward of `tokens` through a LlamaModel built from m.view().
ActivationMap record_activations(const FloatModel& m, std::span<const std::int32_t> tokens, ThreadPool& pool);

}  // namespace peregrine::test

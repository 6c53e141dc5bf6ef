// The shapes of real Llama-family checkpoints, for random-weight models of realistic size
// (`peregrine synth`): speed does not depend on the weight values, only on the shapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// A named shape: the hyper-parameters of a published checkpoint and where to find a
/// tokenizer of the same vocabulary size.
struct ModelShape {
  std::string name;      // "tinyllama-1.1b"
  ModelConfig config;    // rope_style kInterleaved (GGUF row order of Q/K)
  std::string vocab;     // GGUF holding matching tokenizer.* metadata, relative to ../shared
  std::string hf_tokenizer;  // tokenizer.model for a Hugging Face folder, relative to ../shared ("" = none)
  std::string source;    // where the numbers come from
};

/// Every known shape (tinyllama-1.1b, llama2-7b, smollm2-135m, stories110m, stories260k).
const std::vector<ModelShape>& model_shapes();

/// The shape called `name`, or nullptr.
const ModelShape* find_model_shape(std::string_view name);

}  // namespace peregrine

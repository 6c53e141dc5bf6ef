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
  ModelConfig config;    // of the family config.arch (written in its GGUF Q/K row order)
  std::string vocab;     // GGUF holding matching tokenizer.* metadata, relative to ../shared
                         // ("" = none of that size there: the GGUF gets no vocabulary)
  std::string hf_tokenizer;  // tokenizer.model for a Hugging Face folder, relative to ../shared ("" = none)
  std::string source;    // where the numbers come from
};

/// Every known shape: Llama 2 (tinyllama-1.1b, llama2-7b, smollm2-135m, stories110m,
/// stories260k), one per family (llama3.2-1b, mistral-7b, gemma2-2b, qwen2.5-0.5b, qwen3-0.6b,
/// phi3-mini),
/// Mixture-of-Experts (mixtral-8x7b, olmoe-1b-7b, qwen1.5-moe-a2.7b) and the MoE shapes' dense
/// twins with the same active parameters per token (olmoe-1b-7b-dense, qwen1.5-moe-a2.7b-dense).
const std::vector<ModelShape>& model_shapes();

/// The shape called `name`, or nullptr.
const ModelShape* find_model_shape(std::string_view name);

}  // namespace peregrine

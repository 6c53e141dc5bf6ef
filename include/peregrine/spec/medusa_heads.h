// Medusa draft heads (Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with
// Multiple Decoding Heads") in the layout the published checkpoints use (FasterDecoding/Medusa's
// medusa_lm_head: an nn.ModuleList of heads, each nn.Sequential(ResBlock × L, Linear(hidden,
// vocab, bias=False)), ResBlock(x) = x + SiLU(linear(x))):
//   <dir>/config.json                  {"medusa_num_heads": K, "medusa_num_layers": L,
//                                       "hidden_size": d, "vocab_size": V,
//                                       "base_model_name_or_path": ...}
//   <dir>/medusa_lm_head.safetensors   "{k}.{j}.linear.weight" [d, d], "{k}.{j}.linear.bias" [d]
//                                       for j < L, "{k}.{L}.weight" [V, d], for k < K
// Head k reads the target's final hidden state at position t (after its final norm) and predicts
// token t + k + 2 (the target's own LM head predicts t + 1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

struct MedusaHeads {
  std::int64_t heads = 0, layers = 0, hidden = 0, vocab = 0;
  std::string base_model;                          // config.json base_model_name_or_path
  std::map<std::string, std::vector<float>> tensors;  // the names above, f32 row-major

  /// The expected shape of tensor `name`, or an empty vector for a name outside the layout.
  std::vector<std::int64_t> shape(const std::string& name) const;
  /// Every tensor name of the layout, heads in order.
  std::vector<std::string> names() const;
  /// Every tensor of the layout is in `tensors` with its shape's size. Errors: kInvalidArgument
  /// naming the first one missing or misshapen.
  Status validate() const;
};

/// Writes `m` as `dir` (created): config.json and medusa_lm_head.safetensors (F32).
/// Errors: kInvalidArgument (a tensor missing or of the wrong size), kIoError.
Status save_medusa_heads(const MedusaHeads& m, const std::string& dir);

/// Reads a Medusa head folder (F32 / F16 / BF16 tensors, decoded to f32). `hidden` and `vocab`
/// are the target's: a head file for another model is refused. Errors: kNotFound (no config.json
/// or medusa_lm_head.safetensors), kCorruptFile (bad JSON, a tensor missing or misshapen),
/// kInvalidArgument (hidden size or vocabulary differs from the target's, naming both).
Expected<MedusaHeads> load_medusa_heads(const std::string& dir, std::int64_t hidden, std::int64_t vocab);

}  // namespace peregrine

// Random LoRA adapters for a base model (`peregrine lora synth`, the tests): seeded normal A and
// B of a given rank on chosen projections of every layer. B is not zero (as PEFT initializes
// it) so the adapter changes the output: for speed measurements of adapter serving and for
// format / arithmetic parity tests; no trained adapter exists for the synth shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// The projections an adapter can target, by their canonical short names: attn_q, attn_k,
/// attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
const std::vector<std::string>& lora_target_names();

/// The canonical name of a target given as PEFT's module stem ("q" / "q_proj" → "attn_q",
/// "o" / "o_proj" → "attn_output", "gate" / "gate_proj" → "ffn_gate", ...) or canonically
/// ("attn_q"). Errors: kInvalidArgument (none of those, naming it).
Expected<std::string> lora_target_name(const std::string& target);

struct LoraSynthOptions {
  std::int64_t rank = 16;
  float alpha = 32.0f;                     // the adapter's scale is alpha / rank
  std::vector<std::string> targets = lora_target_names();  // canonical names (lora_target_name)
  std::uint32_t seed = 0;
  float stddev = 0.05f;                    // of every A and B entry
};

/// A LoRA adapter for `base`: for each layer and each target (in that order) A [rank, in] then
/// B [out, rank], row-major, each entry drawn from N(0, stddev²) by one std::mt19937(seed) in
/// turn — the same seed gives the same adapter. Laid out for the base (arch, RoPE pairing of
/// attn_q / attn_k rows, head_dim), ready for save_peft_adapter. Errors: kInvalidArgument
/// (rank < 1, stddev not finite or negative, no targets, a target that is not canonical, or a
/// weight the base does not have as a per-layer matrix — e.g. ffn_gate of a MoE layer —
/// naming the tensor).
Expected<LoraAdapter> synth_lora_adapter(const ModelFile& base, const LoraSynthOptions& options);

}  // namespace peregrine

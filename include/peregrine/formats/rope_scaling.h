// Scaled RoPE for contexts longer than a model was pre-trained on, as Hugging Face's
// config.json `rope_scaling` names it (transformers/modeling_rope_utils.py) and llama.cpp stores
// it in GGUF (`{arch}.rope.scaling.type` / `.factor` keys; Llama 3.1+'s per-pair factors as the
// `rope_freqs.weight` tensor, convert_hf_to_gguf.py LlamaModel.generate_extra_tensors).
//
// Every supported kind divides the angular frequency of RoPE pair i, theta^(-2i/head_dim), by a
// per-pair factor f_i >= 1 (what llama.cpp's rope_freqs tensor holds):
//   linear (Chen et al. 2023, position interpolation): f_i = factor for every pair;
//   llama3 (Meta's Llama 3.1 recipe): with wavelength λ_i = 2π / freq_i and the pre-training
//     context L = original_max_position_embeddings, pairs with λ_i < L / high_freq_factor keep
//     f_i = 1, pairs with λ_i > L / low_freq_factor take f_i = factor, and in between
//     f_i = 1 / ((1 − s)/factor + s) with s = (L/λ_i − low_freq_factor) /
//     (high_freq_factor − low_freq_factor);
//   yarn (Peng et al. 2023, YaRN; HF _compute_yarn_parameters, llama.cpp rope_yarn): with
//     d(r) = head_dim · ln(L / (2π r)) / (2 ln theta) the pair index that turns r times over L,
//     low = max(floor(d(beta_fast)), 0), high = min(ceil(d(beta_slow)), head_dim − 1) (high
//     += 0.001 when equal), the extrapolation weight of pair i is e_i = 1 − clamp((i − low) /
//     (high − low), 0, 1) and f_i = 1 / ((1 − e_i)/factor + e_i): fast pairs keep their
//     frequency, slow ones are interpolated. YaRN also scales cos and sin by its attention
//     factor (rope_attention_factor), i.e. the attention scores by its square.
// Dynamic NTK (frequencies that change with the running sequence length) and LongRoPE are not
// supported yet (a clear kUnsupported at load).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peregrine {

struct RopeScaling {
  enum class Kind : std::uint8_t { kNone, kLinear, kLlama3, kYarn };
  Kind kind = Kind::kNone;
  float factor = 1.0f;                      // linear, llama3, yarn
  float low_freq_factor = 1.0f;             // llama3
  float high_freq_factor = 4.0f;            // llama3
  std::int64_t original_context = 8192;     // llama3, yarn: original_max_position_embeddings
  float beta_fast = 32.0f;                  // yarn: rotations over L above which a pair keeps its frequency
  float beta_slow = 1.0f;                   // yarn: rotations below which it is interpolated
  float attention_factor = 0.0f;            // yarn: cos/sin scale; 0 = 0.1·ln(factor) + 1

  bool operator==(const RopeScaling&) const = default;
};

/// "none", "linear", "llama3", "yarn" (HF's rope_type names).
const char* rope_scaling_name(RopeScaling::Kind k);

/// The per-pair frequency divisors f_i, [head_dim / 2] f32 (computed in f64), of `s` for RoPE
/// base `theta`; empty for kNone. Preconditions: head_dim even and > 0, theta > 0, and
/// rope_scaling_error(s) empty.
std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta);

/// The factor RoPE's cos and sin are multiplied by: yarn's attention_factor (default
/// 0.1·ln(factor) + 1, HF get_mscale), 1 for the other kinds.
float rope_attention_factor(const RopeScaling& s);

/// Why `s` is invalid ("" when valid): factor must be >= 1 and finite; llama3 and yarn also
/// need original_context > 0; llama3 0 < low_freq_factor < high_freq_factor, finite; yarn
/// beta_fast > beta_slow > 0 and attention_factor >= 0, finite.
std::string rope_scaling_error(const RopeScaling& s);

}  // namespace peregrine

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
//     (high_freq_factor − low_freq_factor).
// Dynamic NTK, YaRN and LongRoPE are not supported yet (a clear kUnsupported at load).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peregrine {

struct RopeScaling {
  enum class Kind : std::uint8_t { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  float factor = 1.0f;                      // linear, llama3
  float low_freq_factor = 1.0f;             // llama3
  float high_freq_factor = 4.0f;            // llama3
  std::int64_t original_context = 8192;     // llama3: original_max_position_embeddings

  bool operator==(const RopeScaling&) const = default;
};

/// "none", "linear", "llama3" (HF's rope_type names).
const char* rope_scaling_name(RopeScaling::Kind k);

/// The per-pair frequency divisors f_i, [head_dim / 2] f32 (computed in f64), of `s` for RoPE
/// base `theta`; empty for kNone. Preconditions: head_dim even and > 0, theta > 0, and
/// rope_scaling_error(s) empty.
std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta);

/// Why `s` is invalid ("" when valid): factor must be >= 1 and finite; llama3 also needs
/// original_context > 0 and 0 < low_freq_factor < high_freq_factor, finite.
std::string rope_scaling_error(const RopeScaling& s);

}  // namespace peregrine

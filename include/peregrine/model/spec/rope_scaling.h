// Scaled RoPE for contexts longer than a model was pre-trained on, as Hugging Face's
// config.json `rope_scaling` names it (transformers/modeling_rope_utils.py) and llama.cpp stores
// it in GGUF (`{arch}.rope.scaling.type` / `.factor` keys; Llama 3.1+'s per-pair factors as the
// `rope_freqs.weight` tensor, convert_hf_to_gguf.py LlamaModel.generate_extra_tensors; Phi-3's
// LongRoPE factors as `rope_factors_short.weight` / `rope_factors_long.weight`,
// Phi3MiniModel.generate_extra_tensors).
//
// Every supported kind divides the angular frequency of RoPE pair i, theta^(-2i/head_dim), by a
// per-pair factor f_i > 0 (what llama.cpp's rope_freqs tensor holds):
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
//     factor (rope_attention_factor), i.e. the attention scores by its square;
//   longrope (Ding et al. 2024, LongRoPE; Phi-3 128k / Phi-3.5; HF _compute_longrope_parameters):
//     f_i = short_factor[i] while the sequence length n <= L, long_factor[i] once n > L; cos and
//     sin are scaled by attention_factor, by default sqrt(1 + ln(factor) / ln(L)) for factor > 1
//     (else 1), factor being max_position_embeddings / L for Phi-3's top-level L;
//   dynamic (NTK-aware scaling, /u/bloc97 and /u/emozilla; HF _compute_dynamic_ntk_parameters):
//     the base becomes theta' = theta · (factor · m / L − (factor − 1))^(d / (d − 2)) with
//     m = max(n, L), d = head_dim, so f_i = (theta' / theta)^(2i / d) (1 while n <= L).
//     L is original_max_position_embeddings when the config gives it, else
//     max_position_embeddings (HF's function itself always takes max_position_embeddings, its
//     TODO being this field: with L = the context, scaling could never apply inside it).
//
// The sequence length n (longrope, dynamic): as in HF's dynamic_rope_update
// (modeling_rope_utils.py: longrope_frequency_update / dynamic_frequency_update), n = the
// largest position of the forward call + 1; Peregrine's forward takes a ragged batch of
// sequences and applies it per sequence: the rows of sequence s in a forward use the divisors
// of n_s = (s's largest position in that batch) + 1. K rows already in the KV cache keep the
// rotation of the forward that computed them (HF's cached keys do too), so a sequence run
// alone (prefill, chunked prefill, one token per step) matches HF exactly; the logits of a
// position then depend on how the sequence was split into forwards (a prefill of n > L tokens
// rotates all of them with the long / scaled frequencies, a token-by-token decode only those
// at positions >= L), and so can the K/V a prefix cache shares or a speculative draft tree
// extends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peregrine {

struct RopeScaling {
  enum class Kind : std::uint8_t { kNone, kLinear, kLlama3, kYarn, kLongRope, kDynamic };
  Kind kind = Kind::kNone;
  float factor = 1.0f;                      // linear, llama3, yarn, dynamic; longrope: its attention default
  float low_freq_factor = 1.0f;             // llama3
  float high_freq_factor = 4.0f;            // llama3
  std::int64_t original_context = 8192;     // llama3, yarn, longrope, dynamic: original_max_position_embeddings
  float beta_fast = 32.0f;                  // yarn: rotations over L above which a pair keeps its frequency
  float beta_slow = 1.0f;                   // yarn: rotations below which it is interpolated
  float attention_factor = 0.0f;            // yarn, longrope: cos/sin scale; 0 = the kind's default
  std::vector<float> short_factor = {};     // longrope: [head_dim / 2] divisors while n <= L
  std::vector<float> long_factor = {};      // longrope: [head_dim / 2] divisors once n > L

  bool operator==(const RopeScaling&) const = default;
};

/// "none", "linear", "llama3", "yarn", "longrope", "dynamic" (HF's rope_type names).
const char* rope_scaling_name(RopeScaling::Kind k);

/// Whether the divisors of `s` depend on the sequence length (longrope, dynamic).
bool rope_scaling_follows_length(const RopeScaling& s);

/// The per-pair frequency divisors f_i, [head_dim / 2] f32 (computed in f64), of `s` for RoPE
/// base `theta` and a sequence of `seq_len` positions (its largest position + 1; read by
/// longrope and dynamic only, see above); empty for kNone. Preconditions: head_dim even and
/// > 0, theta > 0, and rope_scaling_error(s, head_dim) empty.
std::vector<float> rope_freq_factors(const RopeScaling& s, std::int64_t head_dim, float theta, std::int64_t seq_len = 0);

/// The factor RoPE's cos and sin are multiplied by: yarn's attention_factor (default
/// 0.1·ln(factor) + 1, HF get_mscale), longrope's (default sqrt(1 + ln(factor) /
/// ln(original_context)) when factor > 1, else 1), 1 for the other kinds.
float rope_attention_factor(const RopeScaling& s);

/// Why `s` is invalid for heads of `head_dim` ("" when valid): factor must be >= 1 and finite
/// (longrope: > 0); every kind but linear needs original_context > 0; llama3
/// 0 < low_freq_factor < high_freq_factor, finite; yarn beta_fast > beta_slow > 0; yarn and
/// longrope attention_factor >= 0, finite; longrope short_factor and long_factor of
/// head_dim / 2 positive finite values each, and original_context > 1 where its default
/// attention factor applies.
std::string rope_scaling_error(const RopeScaling& s, std::int64_t head_dim);

}  // namespace peregrine

// A model file of any supported format, reduced to one Llama-family config + named tensors.
//
// Every reader (llama2.c .bin, GGUF, Hugging Face safetensors folder) produces a ModelFile with
// the same canonical tensor names (GGUF's llama names) and PyTorch-style shapes
// ({out_features, in_features}); the model layer never sees the file format. RoPE pairing is a
// config field, not a weight permutation: llama2.c and llama-arch GGUF rotate interleaved pairs
// (x[2i], x[2i+1]) (GGUF writers permuted HF's Q/K rows into that order), Hugging Face
// checkpoints rotate halves (x[i], x[i + head_dim/2]) (GPT-NeoX style).
//
// Canonical tensors (L = layer index, hd = head_dim):
//   token_embd.weight [vocab, dim]          output_norm.weight [dim]
//   output.weight [vocab, dim] (absent when tied to token_embd)
//   blk.L.attn_norm.weight [dim]            blk.L.ffn_norm.weight [dim]
//   blk.L.attn_q.weight [n_heads*hd, dim]   blk.L.attn_output.weight [dim, n_heads*hd]
//   blk.L.attn_k.weight [n_kv_heads*hd, dim] blk.L.attn_v.weight [n_kv_heads*hd, dim]
//   blk.L.ffn_gate.weight [ffn, dim]        blk.L.ffn_up.weight [ffn, dim]
//   blk.L.ffn_down.weight [dim, ffn]
//   rope_freqs.weight [hd / 2] f32 (optional: RoPE pair i's frequency divisor, formats/rope_scaling.h)
// and the families' additions (formats/architecture.h), required by theirs and used by the
// forward wherever present:
//   blk.L.attn_q.bias [n_heads*hd]          blk.L.attn_k.bias, attn_v.bias [n_kv_heads*hd]
//   blk.L.attn_q_norm.weight [hd]           blk.L.attn_k_norm.weight [hd]
//     (OLMoE: [n_heads*hd] and [n_kv_heads*hd], one norm over the whole projection)
// A Mixture-of-Experts layer (config n_experts > 0; eff = expert_ffn_dim, sff =
// shared_expert_ffn_dim) holds, instead of ffn_gate/ffn_up/ffn_down:
//   blk.L.ffn_gate_inp.weight [n_experts, dim]   (the router)
//   blk.L.ffn_gate.E.weight [eff, dim]  blk.L.ffn_up.E.weight [eff, dim]  blk.L.ffn_down.E.weight [dim, eff]
//     for each expert E in [0, n_experts) (llama.cpp's per-expert names; its GGUF files stack
//     them as blk.L.ffn_{gate,up,down}_exps.weight [n_experts, eff, dim] / [n_experts, dim,
//     eff], split into these row views on load, formats/fused_projections.h)
//   and with a shared expert (Qwen2-MoE): blk.L.ffn_{gate,up}_shexp.weight [sff, dim],
//   blk.L.ffn_down_shexp.weight [dim, sff], blk.L.ffn_gate_inp_shexp.weight [dim] (its
//   sigmoid gate; HF shared_expert_gate [1, dim]).
//   blk.L.post_attention_norm.weight [dim]  blk.L.post_ffw_norm.weight [dim]   (Gemma 2)
// Every "*norm.weight" is an RMSNorm weight w applied as (config.norm_weight_offset + w): the
// GGUF form (offset 0) of a Gemma checkpoint stores 1 + w, its Hugging Face form w (offset 1).
// Phi-3's fused blk.L.attn_qkv.weight [(n_heads + 2·n_kv_heads)·hd, dim] and
// blk.L.ffn_gate_up.weight [2·ffn, dim] exist only inside the readers and writers: a loaded
// ModelFile holds their row views under the names above (formats/fused_projections.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/mapped_file.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/formats/architecture.h"
#include "peregrine/formats/gguf.h"
#include "peregrine/formats/rope_scaling.h"

namespace peregrine {

enum class ModelFormat : std::uint8_t { kLlama2c, kGguf, kHuggingFace };

/// "llama2.c", "gguf", "hf".
const char* model_format_name(ModelFormat f);

/// What differs from one layer of a model to the next, derived once from its config
/// (ModelConfig::layer_spec; gemma.cpp's LayerConfig, vLLM's per-layer KV cache spec).
struct LayerSpec {
  std::int64_t window = 0;      // sliding window (AttentionShape::window); 0: global attention
  float rope_theta = 10000.0f;  // RoPE base
  bool rope_scaled = true;      // the config's rope_scaling / the rope_freqs tensor apply
};

/// Hyper-parameters of a Llama-family decoder.
struct ModelConfig {
  std::string arch = "llama";    // a name of formats/architecture.h
  std::int64_t dim = 0;          // residual width (hidden_size)
  std::int64_t n_layers = 0;
  std::int64_t n_heads = 0;      // query heads
  std::int64_t n_kv_heads = 0;   // key/value heads (< n_heads: GQA; 1: MQA)
  std::int64_t head_dim = 0;     // usually dim / n_heads
  std::int64_t ffn_dim = 0;      // SwiGLU intermediate width
  std::int64_t vocab_size = 0;
  std::int64_t max_seq_len = 0;  // context length (tokens)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  RopeScaling rope_scaling;      // HF rope_scaling / GGUF {arch}.rope.scaling.* (+ LongRoPE's
                                 // rope_factors_* tensors, moved in here); a GGUF
                                 // rope_freqs.weight tensor (Llama 3.1+) is kept as a tensor
  bool tied_embeddings = true;   // LM head reuses token_embd.weight
  bool ffn_down_hadamard = false; // the SwiGLU output is rotated by the orthonormal Hadamard
                                  // transform (kernels/cpu/hadamard.h) before ffn_down, whose
                                  // weights carry the inverse rotation (QuaRot's online rotation,
                                  // quant/rotate_model.h). GGUF key peregrine.ffn_down_hadamard,
                                  // config.json key peregrine_ffn_down_hadamard.
  // Mixture-of-Experts FFN (Shazeer et al. 2017; Mixtral, Jiang et al. 2024): each token's
  // FFN is the router-weighted sum of its top-k experts' SwiGLU FFNs (model/moe_ffn.h).
  std::int64_t n_experts = 0;              // routed experts per layer; 0 = a dense FFN
                                           // (GGUF {arch}.expert_count)
  std::int64_t n_experts_used = 0;         // top-k experts per token ({arch}.expert_used_count)
  std::int64_t expert_ffn_dim = 0;         // each routed expert's SwiGLU width
                                           // ({arch}.expert_feed_forward_length, else ffn_dim)
  std::int64_t shared_expert_ffn_dim = 0;  // Qwen2-MoE's always-on shared expert, 0 = none
                                           // ({arch}.expert_shared_feed_forward_length)
  bool expert_weights_norm = false;        // top-k probabilities renormalized to sum to 1
                                           // (Architecture::expert_weights_norm, HF norm_topk_prob)


  // Sliding window and Gemma 2 (formats/architecture.h); the defaults are Llama's.
  std::int64_t sliding_window = 0;         // > 0: a local layer's query at position p sees keys
                                           // [p - sliding_window + 1, p] (HF sliding_window,
                                           // GGUF {arch}.attention.sliding_window); 0: none
  std::int64_t sliding_window_period = 0;  // local layers: 0 every layer (Mistral); P >= 2 every
                                           // layer l with l % P != P - 1 (Gemma 2: P = 2, even l;
                                           // Gemma 3: P = 6; GGUF {arch}.attention.sliding_window_pattern)
  float rope_theta_local = 0.0f;           // > 0: the RoPE base of local layers, which also take
                                           // no rope scaling (Gemma 3: 10 000, HF rope_local_base_freq,
                                           // GGUF {arch}.rope.freq_base_swa); 0: rope_theta everywhere
  float attn_scale = 0.0f;       // attention score scale; 0: 1/sqrt(head_dim) (Gemma 2:
                                 // query_pre_attn_scalar^-0.5, GGUF {arch}.attention.scale)
  float attn_softcap = 0.0f;     // scores → cap · tanh(score / cap) (attn_logit_softcapping); 0: none
  float final_softcap = 0.0f;    // logits → cap · tanh(logit / cap) (final_logit_softcapping); 0: none
  float embed_scale = 0.0f;      // embedding rows × embed_scale (Gemma: sqrt(dim) in f32); 0: none
  float norm_weight_offset = 0.0f;  // every RMSNorm scales by (offset + w): 1 for Gemma's HF
                                    // weights, 0 for its GGUF ones (which hold 1 + w)
  FfnActivation activation = FfnActivation::kSilu;  // the gated FFN's activation
  std::int64_t first_layer = 0;  // the index of layer 0 in the whole model: > 0 only in a
                                 // pipeline stage's file (model/pipeline_parallel.h), whose
                                 // layers are renumbered from 0; layer_window counts from it

  /// The sliding window of layer `layer` (AttentionShape::window): sliding_window on a local
  /// layer (sliding_window_period above, counted on first_layer + layer), 0 on a global one.
  std::int64_t layer_window(std::int64_t layer) const;

  /// Layer `layer`'s window, RoPE base and whether RoPE scaling applies: a local layer (window
  /// > 0) takes rope_theta_local, unscaled, where that is set; every other layer rope_theta.
  LayerSpec layer_spec(std::int64_t layer) const;

  /// Checks positivity and divisibility (n_heads % n_kv_heads, even head_dim), the Gemma 2
  /// fields (sliding_window, sliding_window_period >= 0; attn_scale, softcaps, embed_scale
  /// finite and >= 0; norm_weight_offset finite) and the experts (1 <= n_experts_used <=
  /// n_experts, expert_ffn_dim > 0; all zero for a dense model).
  /// Errors: kCorruptFile naming the bad field; kUnsupported (unknown arch).
  Status validate() const;

 private:
  Status validate_experts() const;
};

/// A loaded model: config, canonical tensors, and what keeps their bytes alive (the file
/// mappings, and owned buffers of tensors converted in memory, see quant/convert_model.h).
struct ModelFile {
  ModelFormat format = ModelFormat::kGguf;
  std::string path;  // file or folder given by the user
  ModelConfig config;
  std::map<std::string, TensorView> tensors;  // canonical name → view
  std::vector<std::shared_ptr<const void>> storage;  // MappedFile or owned byte buffers
  std::optional<GgufFile> gguf;  // GGUF only: metadata (tokenizer, chat template)

  /// Tensor by canonical name, or nullptr.
  const TensorView* find(const std::string& name) const;
  /// Total bytes of all tensors.
  std::size_t weight_bytes() const;
};

/// Sets the fields a family implies (formats/architecture.h) on `c`: arch, activation,
/// embed_scale (sqrt(dim) where embed_scale_sqrt_dim; needs c.dim), sliding_window_period,
/// rope_theta_local.
void apply_architecture(ModelConfig& c, const Architecture& family);

/// Whether canonical tensor `name` is an RMSNorm weight ("…norm.weight"), the tensors
/// norm_weight_offset applies to.
bool is_norm_weight(std::string_view name);

/// Canonical name of a per-layer weight: layer_tensor_name(3, "attn_q") == "blk.3.attn_q.weight".
std::string layer_tensor_name(std::int64_t layer, std::string_view name);

/// Canonical name of one expert's matrix: expert_tensor_name(3, "ffn_up", 7) ==
/// "blk.3.ffn_up.7.weight" (proj: ffn_gate, ffn_up or ffn_down).
std::string expert_tensor_name(std::int64_t layer, std::string_view proj, std::int64_t expert);

/// The shape of canonical tensor `name` under `c` (the table above: {out, in} for a matrix,
/// {dim} for a norm); nullopt for a name outside the Llama layout or a layer index outside
/// [0, n_layers).
std::optional<std::vector<std::int64_t>> llama_tensor_shape(const ModelConfig& c, std::string_view name);

/// Checks that every canonical tensor the config implies exists with the right shape and that
/// norms are F32/F16/BF16. Errors: kCorruptFile (missing tensor / wrong shape), kUnsupported.
Status validate_llama_tensors(const ModelFile& m);

/// Opens a model from a llama2.c .bin, a .gguf file, or a Hugging Face folder (config.json +
/// safetensors), detecting the format from the path and magic bytes, and validates it.
/// Errors: those of MappedFile::open and the format readers; kUnsupported for unknown formats.
Expected<ModelFile> load_model_file(const std::string& path);

}  // namespace peregrine

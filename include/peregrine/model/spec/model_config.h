// The model's meaning, independent of the file it came from: the hyper-parameters of a decoder
// of one of the families of model/spec/architecture.h (ModelConfig), and what each layer takes
// from them (LayerSpec). The readers of formats/ fill a ModelConfig from a file; the model, the
// KV cache's shape and the tools read it.
#pragma once

#include <cstdint>
#include <string>

#include "peregrine/core/ffn_activation.h"
#include "peregrine/core/rope_style.h"
#include "peregrine/core/status.h"
#include "peregrine/kv/kv_shape.h"
#include "peregrine/model/spec/architecture.h"
#include "peregrine/model/spec/rope_scaling.h"

namespace peregrine {

/// What one layer of a model computes, derived once from its config and family
/// (ModelConfig::layer_spec; gemma.cpp's LayerConfig, vLLM's per-layer KV cache spec). The
/// forward (model/llama_model.h) reads it instead of deciding per call; the layer is always
/// x += [post_norm](attention(attn_norm(x))), x += [post_norm](FFN(ffn_norm(x))).
struct LayerSpec {
  // Attention and its KV cache kind.
  std::int64_t window = 0;      // > 0: sliding window (AttentionShape::window); its KV blocks
                                // form window groups that free what left it
                                // (kv/kv_layer_groups.h); 0: full attention
  float rope_theta = 10000.0f;  // RoPE base
  bool rope_scaled = true;      // the config's rope_scaling / the rope_freqs tensor apply
  bool qkv_bias = false;        // blk.L.attn_{q,k,v}.bias added after the projections (Qwen2)
  QkNorm qk_norm = QkNorm::kNone;  // RMSNorm of q and k before RoPE (Qwen3 per head, OLMoE whole)
  // Norms.
  bool post_norms = false;      // RMSNorm of the attention and FFN outputs before each residual
                                // add (Gemma 2 / 3: post_attention_norm, post_ffw_norm)
  float norm_weight_offset = 0.0f;  // every RMSNorm of the layer scales by (offset + w)
  // FFN.
  bool moe = false;             // routed experts (model/moe_ffn.h) instead of the dense FFN
  FfnActivation activation = FfnActivation::kSilu;  // the gated FFN's activation
};

/// Hyper-parameters of a Llama-family decoder.
struct ModelConfig {
  std::string arch = "llama";    // a name of model/spec/architecture.h
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
                                  // transform (kernels/cpu/elementwise/hadamard.h) before ffn_down, whose
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


  // Sliding window and Gemma 2 (model/spec/architecture.h); the defaults are Llama's.
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

  /// Layer `layer`'s spec: its window; its RoPE base and whether RoPE scaling applies (a local
  /// layer, window > 0, takes rope_theta_local, unscaled, where that is set; every other layer
  /// rope_theta); the family's (arch) Q/K/V biases, Q/K norm and post-norms; the norm weight
  /// offset, MoE (n_experts > 0) and activation of the config.
  LayerSpec layer_spec(std::int64_t layer) const;

  /// Checks positivity and divisibility (n_heads % n_kv_heads, even head_dim), the Gemma 2
  /// fields (sliding_window, sliding_window_period >= 0; attn_scale, softcaps, embed_scale
  /// finite and >= 0; norm_weight_offset finite) and the experts (1 <= n_experts_used <=
  /// n_experts, expert_ffn_dim > 0; all zero for a dense model).
  /// Errors: kCorruptFile naming the bad field; kUnsupported (unknown arch).
  Status validate() const;

  /// The KV cache's view of this model: n_layers, n_kv_heads, head_dim, and each layer's
  /// window (layer_window) when some layer has one.
  KvShape kv_shape() const;

 private:
  Status validate_experts() const;
};

/// Sets the fields a family implies (model/spec/architecture.h) on `c`: arch, activation,
/// embed_scale (sqrt(dim) where embed_scale_sqrt_dim; needs c.dim), sliding_window_period,
/// rope_theta_local.
void apply_architecture(ModelConfig& c, const Architecture& family);

}  // namespace peregrine

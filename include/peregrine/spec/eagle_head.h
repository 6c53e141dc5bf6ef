// EAGLE-1 draft heads (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature
// Uncertainty", ICML 2024) in the layout the published checkpoints use: the state dict of
// SafeAILab/EAGLE's `Model` (eagle/model/cnets.py as of the EAGLE-1 release, before the EAGLE-2
// commit bfeb532; the same names in eagle/model/cnets1.py today), a one-layer Llama decoder:
//   <dir>/config.json  a transformers LlamaConfig (eagle/train/vicuna_7B_config.json,
//                      llama_2_chat_7B_config.json): "architectures": ["LlamaForCausalLM"],
//                      "model_type": "llama", "hidden_act": "silu", "hidden_size": d,
//                      "intermediate_size": f, "num_attention_heads": H,
//                      "num_key_value_heads": KV, "head_dim": hd, "num_hidden_layers": 1,
//                      "vocab_size": V, "rms_norm_eps", "rope_theta", "max_position_embeddings",
//                      "bias" (whether fc has a bias: eagle/model/ea_model.py reads con["bias"],
//                      default true), "tie_word_embeddings": false, "torch_dtype": "float32", …
//   <dir>/model.safetensors (F32 written; F32 / F16 / BF16 read), row-major {out, in} weights:
//     fc.weight                                  [d, 2d]  input = cat(embed(token), feature)
//     fc.bias                                    [d]      when "bias" (true by default)
//     layers.0.self_attn.q_proj.weight           [H·hd, d]
//     layers.0.self_attn.k_proj.weight           [KV·hd, d]
//     layers.0.self_attn.v_proj.weight           [KV·hd, d]
//     layers.0.self_attn.o_proj.weight           [d, H·hd]
//     layers.0.post_attention_layernorm.weight   [d]
//     layers.0.mlp.gate_proj.weight              [f, d]
//     layers.0.mlp.up_proj.weight                [f, d]
//     layers.0.mlp.down_proj.weight              [d, f]
//     embed_tokens.weight                        [V, d]   optional: the target's embedding,
//                                                         frozen (EAGLE-1's loader is strict, so
//                                                         its checkpoints carry it)
// Layer 0 has no input_layernorm (cnets.py's LlamaDecoderLayer skips it for index 0) and the
// model no final norm. The EAGLE-1 code published checkpoints as pytorch_model.bin; the
// EAGLE-2/3 loader (ea_model.py) also reads model.safetensors, the only file read here.
// Q/K use Hugging Face's rotate_half RoPE pairing (i, i + hd/2) with base rope_theta (EAGLE-1's
// cnets.py always used 10000; EAGLE-2's reads config.rope_theta).
// Row i of a sequence (RoPE position i) reads the target's feature f_i (its last hidden state
// after its final norm, what its LM head reads) and the next token x_{i+1}, and predicts
// f_{i+1}; the target's LM head on that prediction gives the distribution of x_{i+2}.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

struct EagleHead {
  std::int64_t hidden = 0;        // d: hidden_size, the target's
  std::int64_t intermediate = 0;  // f: intermediate_size (SwiGLU width)
  std::int64_t heads = 0;         // H: num_attention_heads
  std::int64_t kv_heads = 0;      // KV: num_key_value_heads (divides H)
  std::int64_t head_dim = 0;      // hd: head_dim (even; hidden_size / num_attention_heads when absent)
  std::int64_t vocab = 0;         // V: vocab_size, the target's
  std::int64_t max_positions = 2048;  // max_position_embeddings
  float rms_eps = 1e-6f;          // rms_norm_eps
  float rope_theta = 10000.0f;    // rope_theta
  bool bias = true;               // fc.bias present ("bias")
  std::string base_model;         // base_model_name_or_path (informational)
  std::map<std::string, std::vector<float>> tensors;  // the names above, f32 row-major

  /// The required tensor names in layout order (fc.bias only when `bias`; not embed_tokens.weight).
  std::vector<std::string> names() const;
  /// The expected shape of tensor `name` (embed_tokens.weight included), or an empty vector for
  /// a name outside the layout.
  std::vector<std::int64_t> shape(const std::string& name) const;
  /// Possible dimensions, and every required tensor in `tensors` with its shape's size.
  /// Errors: kInvalidArgument naming the first problem.
  Status validate() const;
};

/// The dimensions of a head for a target of config `target` (hidden, intermediate, heads, KV
/// heads, head_dim, vocabulary, context, ε, RoPE θ: the target's), with a bias, no tensors.
EagleHead eagle_head_shape(const ModelConfig& target);

/// Writes `head` as `dir` (created): config.json and model.safetensors (F32; embed_tokens.weight
/// too when `head.tensors` holds it). Errors: kInvalidArgument (a dimension < 1, H not a
/// multiple of KV, odd head_dim, a tensor missing or of the wrong size), kIoError.
Status save_eagle_head(const EagleHead& head, const std::string& dir);

/// Reads an EAGLE-1 head folder (config.json + model.safetensors; tensors F32 / F16 / BF16,
/// decoded to f32). `hidden` and `vocab` are the target's: a head for another model is refused.
/// Errors: kNotFound (no config.json; no model.safetensors — a folder holding only
/// pytorch_model.bin is told to convert it), kCorruptFile (bad JSON or field types, impossible
/// dimensions, a tensor missing or misshapen, a damaged safetensors file), kUnsupported
/// (num_hidden_layers other than 1, rope_scaling), kInvalidArgument (hidden size or vocabulary
/// differs from the target's, naming both).
Expected<EagleHead> load_eagle_head(const std::string& dir, std::int64_t hidden, std::int64_t vocab);

}  // namespace peregrine

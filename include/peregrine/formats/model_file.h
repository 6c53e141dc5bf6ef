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
//   rope_freqs.weight [hd / 2] f32 (optional: RoPE pair i's frequency divisor, model/spec/rope_scaling.h)
// and the families' additions (model/spec/architecture.h), required by theirs and used by the
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
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/model/spec/model_config.h"

namespace peregrine {

enum class ModelFormat : std::uint8_t { kLlama2c, kGguf, kHuggingFace };

/// "llama2.c", "gguf", "hf".
const char* model_format_name(ModelFormat f);

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

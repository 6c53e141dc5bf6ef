// GGUF (the families of model/spec/architecture.h: llama, qwen2, qwen3, phi3, gemma2) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Reads general.architecture (a family of model/spec/architecture.h), the hyper-parameters from
/// its `{arch}.*` metadata keys (embedding_length, block_count, feed_forward_length,
/// attention.head_count[_kv], attention.key_length (head_dim when given),
/// attention.layer_norm_rms_epsilon, rope.freq_base, rope.scaling.*, context_length,
/// attention.sliding_window (ModelConfig::sliding_window), attn_logit_softcapping /
/// final_logit_softcapping (the family's defaults when absent: llama.cpp's 50 / 30 for gemma2),
/// attention.scale (absent: llama.cpp's gemma2 rule, (dim / n_heads)^-0.5 for 46 layers), the
/// family's implied fields (apply_architecture)) and Peregrine's optional
/// peregrine.ffn_down_hadamard (bool, ModelConfig::ffn_down_hadamard), and
/// maps the tensors (already canonical names; dims are reversed to outermost-first by
/// GgufFile). RoPE: the family's GGUF pairing (llama: interleaved, its converter permuted the
/// Q/K rows for exactly that; qwen2 / qwen3 / phi3 / gemma2: NeoX halves). Gemma 2's norm
/// weights are stored as 1 + w (norm_weight_offset 0).
/// Errors: those of GgufFile::open; kUnsupported (another architecture, V heads wider than K
/// heads, a RoPE scaling type other than linear); kCorruptFile (missing/invalid
/// hyper-parameters or tensors, a family's tensor missing, a negative window / soft-cap / scale
/// or a non-finite one, naming the key).
Expected<ModelFile> load_gguf_model(const std::string& path);

/// The second half of load_gguf_model, on an already parsed file (e.g. GgufFile::parse of an
/// in-memory image, as the fuzzer does): same checks and errors; `path` names it in messages.
/// The views keep pointing where `g`'s do, so their bytes must outlive the result (a mapped
/// file is kept alive in ModelFile::storage).
Expected<ModelFile> gguf_to_model_file(GgufFile g, const std::string& path);

}  // namespace peregrine

// GGUF (llama architecture) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Reads hyper-parameters from the `llama.*` metadata keys (embedding_length, block_count,
/// feed_forward_length, attention.head_count[_kv], attention.layer_norm_rms_epsilon,
/// rope.freq_base, context_length) and maps the tensors (already canonical names; dims are
/// reversed to outermost-first by GgufFile). RoPE: interleaved pairs (llama-arch GGUF files
/// carry Q/K rows permuted by the converter for exactly that).
/// Errors: those of GgufFile::open; kUnsupported (architecture other than llama);
/// kCorruptFile (missing/invalid hyper-parameters or tensors).
Expected<ModelFile> load_gguf_model(const std::string& path);

}  // namespace peregrine

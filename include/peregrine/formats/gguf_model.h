// GGUF (llama architecture) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Reads hyper-parameters from the `llama.*` metadata keys (embedding_length, block_count,
/// feed_forward_length, attention.head_count[_kv], attention.layer_norm_rms_epsilon,
/// rope.freq_base, context_length) and Peregrine's optional peregrine.ffn_down_hadamard (bool,
/// ModelConfig::ffn_down_hadamard), and maps the tensors (already canonical names; dims are
/// reversed to outermost-first by GgufFile). RoPE: interleaved pairs (llama-arch GGUF files
/// carry Q/K rows permuted by the converter for exactly that).
/// Errors: those of GgufFile::open; kUnsupported (architecture other than llama);
/// kCorruptFile (missing/invalid hyper-parameters or tensors).
Expected<ModelFile> load_gguf_model(const std::string& path);

/// The second half of load_gguf_model, on an already parsed file (e.g. GgufFile::parse of an
/// in-memory image, as the fuzzer does): same checks and errors; `path` names it in messages.
/// The views keep pointing where `g`'s do, so their bytes must outlive the result (a mapped
/// file is kept alive in ModelFile::storage).
Expected<ModelFile> gguf_to_model_file(GgufFile g, const std::string& path);

}  // namespace peregrine

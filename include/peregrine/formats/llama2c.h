// llama2.c checkpoints (Karpathy's run.c "legacy" v0 export) → ModelFile.
#pragma once

#include <string>

#include "peregrine/formats/model_file.h"

namespace peregrine {

/// Layout: 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len}
/// (negative vocab_size: an unshared classifier follows), then float32 arrays:
/// token_embedding [vocab, dim], rms_att [L, dim], wq [L, n_heads*hd, dim],
/// wk/wv [L, n_kv*hd, dim], wo [L, dim, n_heads*hd], rms_ffn [L, dim], w1 [L, hidden, dim],
/// w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim], freq_cis_real/imag
/// [seq_len, hd/2] (unused: RoPE is recomputed), wcls [vocab, dim] if unshared.
/// RoPE: interleaved pairs, theta 10000; RMSNorm eps 1e-5.
/// Errors: kCorruptFile (bad header values, file size not matching the header exactly).
Expected<ModelFile> load_llama2c_model(const std::string& path);

}  // namespace peregrine

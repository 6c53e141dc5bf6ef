// Random-weight Llama models of real shapes, written tensor by tensor (`peregrine synth`), for
// speed measurements at realistic sizes: speed does not depend on the weight values.
//
// Weights: norms are 1; matrices are uniform on [-a, a) with a = 0.02·√3 (std 0.02, the usual
// Llama/GPT-2 initialisation), so a forward stays finite at any depth. Row r of tensor `name`
// (in GGUF row order) is drawn from xoshiro256+ (core/prng.h) seeded by hashing (seed, name, r):
// every row can be made on its own (threads, HF row order), and the same seed gives the same
// bytes whatever the thread count. Generation and encoding go a few MiB of rows at a time, so
// memory stays small whatever the model size (llama2-7b f32, 27 GB, is written in ~64 MiB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/model_shapes.h"

namespace peregrine {

struct SynthOptions {
  DType dtype = DType::kF32;  // weight matrices (rows not a multiple of 32 fall back to F16
                              // under Q8_0/Q4_0, see quant/convert_model.h matrix_dtype_for)
  std::uint64_t seed = 0;
  std::string vocab_gguf;     // GGUF output: copy this file's tokenizer.* metadata ("" = none)
  std::string hf_tokenizer;   // HF output: copy this file (tokenizer.model) in ("" = none)
};

struct SynthReport {
  std::size_t n_tensors = 0;
  std::uint64_t weight_bytes = 0;         // tensor bytes written (without padding)
  std::vector<std::string> f16_fallback;  // matrices stored as F16 instead of Q8_0/Q4_0
};

/// Writes a llama-architecture GGUF v3 file at `path`: tensors in llama.cpp's order
/// (token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
/// ffn_up, ffn_down}, output_norm, output when untied), norms F32, matrices o.dtype, Q/K rows
/// in GGUF's interleaved-RoPE order; metadata general.architecture/name/file_type
/// (/quantization_version for Q8_0/Q4_0) and the llama.* keys of llama.cpp, then the
/// tokenizer.* keys of o.vocab_gguf. Errors: kInvalidArgument (shape config invalid, vocab
/// size differing from the tokenizer's); those of GgufFile::open on the vocab file; kIoError
/// (cannot create or write `path`; no partial file is left).
Expected<SynthReport> synth_gguf(const ModelShape& shape, const SynthOptions& o, const std::string& path,
                                 ThreadPool& pool);

/// Writes a Hugging Face folder `dir` (created if needed): config.json and model.safetensors
/// with HF tensor names, every tensor in o.dtype, Q/K rows in HF's rotate-half order — the
/// same model, value for value, as synth_gguf with the same seed — plus o.hf_tokenizer.
/// Errors: kUnsupported (o.dtype Q8_0/Q4_0: safetensors has no block types); kInvalidArgument
/// (shape config invalid; `dir` is a file); kIoError.
Expected<SynthReport> synth_hf(const ModelShape& shape, const SynthOptions& o, const std::string& dir,
                               ThreadPool& pool);

}  // namespace peregrine

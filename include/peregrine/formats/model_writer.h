// Writing a (quantized) ModelFile back to disk: GGUF for the llama.cpp-compatible formats and a
// Hugging Face folder (config.json + model.safetensors) for the group-wise int (GPTQ / AWQ
// layouts), int8 W8A8 and FP8 results.
#pragma once

#include <string>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// How quantized linears are laid out in a Hugging Face folder.
enum class HfQuantLayout : std::uint8_t {
  kGptq,        // AutoGPTQ / transformers GPTQ: qweight int32 [in*bits/32, out], qzeros int32
                // [groups, out*bits/32], scales f16 [groups, out], g_idx int32 [in];
                // quantize_config.json and config.json "quantization_config" (quant_method "gptq")
  kAwq,         // AutoAWQ GEMM: qweight int32 [in, out*bits/32] (AWQ nibble order), qzeros int32
                // [groups, out*bits/32], scales f16 [groups, out] (quant_method "awq")
  kCompressed,  // int8 W8A8 / FP8: weight I8 / F8_E4M3 / F8_E5M2 [out, in] + weight_scale F32
                // [out] (quant_method "peregrine" with the activation mode in config.json)
};

/// The file the model's tokenizer was read from, for copying next to a written model:
/// llama2.c: tokenizer.bin / tok512.bin beside the checkpoint; HF folder: tokenizer.json or
/// tokenizer.model; GGUF: "" (the tokenizer is in the metadata, m.gguf).
/// Errors: kNotFound (no tokenizer file).
Expected<std::string> tokenizer_file_of(const ModelFile& m);

/// Writes `m` (tensors F32/F16/BF16/Q8_0/Q4_0) as a GGUF v3 file with llama metadata; the
/// tokenizer metadata comes from m.gguf when m was read from GGUF, else from `tokenizer_path`
/// (a llama2.c tokenizer.bin or a vocab GGUF). config().ffn_down_hadamard is written as
/// peregrine.ffn_down_hadamard (llama.cpp does not know it: such a file runs only in Peregrine).
/// Errors: kUnsupported (another dtype), kNotFound / kCorruptFile (tokenizer), kIo.
Status save_gguf_model(const ModelFile& m, const std::string& path, const std::string& tokenizer_path);

/// Writes `m` as a Hugging Face folder `dir` (created): config.json (with
/// "quantization_config" when a linear is quantized), model.safetensors, and the tokenizer
/// (`tokenizer_path` copied as tokenizer.json / tokenizer.model / tokenizer.bin by its kind, or
/// for a GGUF source the vocabulary as tokenizer.gguf). kInt linears use `layout`
/// (kGptq or kAwq; act_bits 8 → kCompressed); F8 linears are always kCompressed.
/// load_hf_model reads every layout back to the same tensors.
/// Errors: kUnsupported (a dtype the layout cannot hold, e.g. kInt 3-bit in the AWQ layout),
/// kNotFound (tokenizer), kIo.
Status save_hf_model(const ModelFile& m, const std::string& dir, HfQuantLayout layout,
                     const std::string& tokenizer_path);

}  // namespace peregrine

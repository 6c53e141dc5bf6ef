// Writing a (quantized) ModelFile back to disk: GGUF for the llama.cpp-compatible formats and a
// Hugging Face folder (config.json + model.safetensors) for the group-wise int (GPTQ / AWQ
// layouts), int8 W8A8 and FP8 results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// How quantized linears are laid out in a Hugging Face folder (details, conventions and the
/// interop limits in src/formats/hf/gptq_layout.h, awq_layout.h, compressed_layout.h).
enum class HfQuantLayout : std::uint8_t {
  kGptq,        // AutoGPTQ / transformers GPTQ: qweight int32 [in*bits/32, out], qzeros int32
                // [groups, out*bits/32], scales f16 [groups, out], g_idx int32 [in] (= i / group);
                // quantize_config.json and config.json "quantization_config" (quant_method "gptq",
                // checkpoint_format "gptq": qzeros hold zero − 1 like AutoGPTQ, or "gptq_v2"
                // when a zero point is 0); word counts round up (zero-padded) when in*bits or
                // out*bits is not a multiple of 32; partial last groups are groups of their own
  kAwq,         // AutoAWQ GEMM: qweight int32 [in, out*bits/32] (AWQ nibble order), qzeros int32
                // [groups, out*bits/32], scales f16 [groups, out] (quant_method "awq"; 4-bit only)
  kCompressed,  // int8 W8A8 / FP8: weight I8 / F8_E4M3 / F8_E5M2 [out, in] + weight_scale F32
                // [out] (quant_method "peregrine" with bits, act_bits and outlier_threshold);
                // int linears must be symmetric per-channel
};

/// The file the model's tokenizer was read from, for copying next to a written model:
/// llama2.c: tokenizer.bin / tok512.bin beside the checkpoint; HF folder: the first of
/// tokenizer.json, tokenizer.model, tokenizer.bin, tokenizer.gguf (the last two as
/// save_hf_model writes them); GGUF: "" (the tokenizer is in the metadata, m.gguf).
/// load_tokenizer (tokenizer/tokenizer.h) opens the same file. Errors: kNotFound (none there).
Expected<std::string> tokenizer_file_of(const ModelFile& m);

/// Writes `m` (tensors F32/F16/BF16 or any ggml block format) as a GGUF v3 file with llama
/// metadata (gguf_llama_metadata.h; general.file_type `file_type` when given — a
/// quantization mix's LLAMA_FTYPE id such as Q4_K_M 15 — else guessed from the most common
/// matrix dtype, general.name
/// from m's GGUF or file name). The tokenizer metadata comes from m.gguf when m was read from a
/// GGUF with a tokenizer, else from `tokenizer_path`: a vocab GGUF (its tokenizer.* keys copied)
/// or a llama2.c tokenizer.bin (converted: add_llama2c_tokenizer_metadata). Q/K rows go to the
/// family's GGUF pairing (llama: interleaved, so an HF model's NeoX rows are reordered; qwen2 /
/// qwen3 / phi3 keep NeoX); Phi-3's gate and up rows are written fused as its ffn_up, as
/// llama.cpp requires (Q/K/V stay split, which it accepts). config.ffn_down_hadamard
/// is written as peregrine.ffn_down_hadamard (llama.cpp does not know it: such a file runs only
/// in Peregrine). RoPE scaling: linear / yarn as rope.scaling keys, llama3 as the
/// rope_freqs.weight tensor, LongRoPE as llama.cpp's Phi-3 files hold it (rope_factors_long /
/// rope_factors_short.weight f32 [head_dim / 2] and rope.scaling.original_context_length /
/// .attn_factor). Spec: ggml/docs/gguf.md, llama.cpp's llama keys.
/// Errors: kUnsupported (another dtype; dynamic NTK RoPE scaling; a tokenizer.json / tokenizer.model, which only
/// llama.cpp's converter turns into GGUF metadata), kNotFound (no tokenizer), kCorruptFile
/// (tokenizer file), kInvalidArgument (a tokenizer of another vocabulary size; Phi-3 gate and
/// up of different dtypes), kIoError.
Status save_gguf_model(const ModelFile& m, const std::string& path, const std::string& tokenizer_path,
                       std::optional<std::uint32_t> file_type = std::nullopt);

/// Writes `m` as a Hugging Face folder `dir` (created): config.json (with
/// "quantization_config" when a linear is quantized, peregrine_ffn_down_hadamard when set),
/// model.safetensors (Q/K rows in HF's NeoX order), quantize_config.json for GPTQ, and the
/// tokenizer (`tokenizer_path` copied as tokenizer.json / tokenizer.model / tokenizer.gguf /
/// tokenizer.bin by its kind, with tokenizer_config.json and chat_template.jinja from beside
/// it; or when it is empty, m's GGUF vocabulary as a vocab-only tokenizer.gguf and its
/// tokenizer.chat_template as chat_template.jinja). kInt linears use `layout` (kGptq or kAwq);
/// kInt with act_bits 8 goes to kCompressed when every int linear is symmetric per-channel
/// (W8A8, LLM.int8()), else keeps `layout` with Peregrine's "act_bits" / "outlier_threshold"
/// keys in its quantization_config (group-wise W4A8; other readers would run it as W4A16);
/// F8 linears are always kCompressed; one file holds one layout
/// and one set of int parameters (src/formats/hf/hf_quant_plan.h). load_hf_model reads every layout back to the same tensors
/// (kInt rows byte for byte, Q/K rows in NeoX order).
/// Errors: kUnsupported (a dtype the layout cannot hold, e.g. kInt 3-bit in the AWQ layout,
/// Q8_0 / Q4_0; int linears with different parameters), kInvalidArgument (`dir` is a file; a
/// tensor whose bytes do not match its shape), kNotFound (tokenizer), kIoError.
Status save_hf_model(const ModelFile& m, const std::string& dir, HfQuantLayout layout,
                     const std::string& tokenizer_path);

}  // namespace peregrine

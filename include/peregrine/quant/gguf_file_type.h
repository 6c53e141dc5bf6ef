// llama.cpp's GGUF file types (llama_ftype, the TYPE argument of `llama-quantize IN OUT TYPE`):
// a main ggml type plus the per-tensor choices llama-quantize makes for each mix (which tensors
// get more bits, and the fallbacks for rows that are not whole blocks).
//
// Spec: llama.cpp c392e50, include/llama.h (LLAMA_FTYPE_* ids) and src/llama-quant.cpp
// (llama_model_quantize_impl: which tensors are quantized; llama_tensor_get_type: the mixes),
// for llama-architecture models without experts and without an importance matrix.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

enum class GgufFileType : std::uint8_t {
  kF32, kF16, kBF16, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K_S, kQ3_K_M, kQ3_K_L,
  kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M, kQ6_K, kIQ4_NL, kIQ4_XS
};

/// llama-quantize's name: "F32", "F16", "BF16", "Q4_0", ..., "Q4_K_M", "IQ4_XS".
std::string_view gguf_file_type_name(GgufFileType t);
/// Inverse of gguf_file_type_name, case-insensitive; nullopt if unknown.
std::optional<GgufFileType> gguf_file_type_from_name(std::string_view name);
/// Every name, comma-separated (for error messages).
std::string gguf_file_type_names();
/// The LLAMA_FTYPE id written as general.file_type (Q4_0 2, Q4_K_M 15, IQ4_XS 30, ...).
std::uint32_t llama_ftype_id(GgufFileType t);
/// The mix's main type (F32, F16, BF16, Q4_0, ..., Q3_K for the Q3_K_* mixes, ...).
DType gguf_file_type_dtype(GgufFileType t);

/// The dtype llama-quantize gives canonical tensor `name` of shape `shape` ({out, in}; GGUF
/// ne0 = in) of a model with config `c` (output.weight absent when c.tied_embeddings):
/// - 1-D tensors, norms and Mixture-of-Experts routers (ffn_gate_inp) stay F32 (llama-quantize
///   keeps their type; Peregrine's copy is F32); each expert's matrix is typed as its dense
///   counterpart (blk.L.ffn_down.E as ffn_down).
/// - F32 / F16 / BF16: every matrix in that type.
/// - quantized mixes: the main type, except output.weight (or token_embd.weight when tied):
///   Q6_K (Q8_0 stays Q8_0; Q8_0 when in is not a multiple of the main type's block); attn_v
///   and ffn_down by layer (use_more_bits: the first and last eighth of the layers and every
///   third between) and attn_output for the Q2_K / Q3_K_* / Q4_K_* / Q5_K_M / IQ4_* mixes as
///   in llama_tensor_get_type; then, when `in` is not a multiple of the chosen type's block,
///   the fallback (Q2_K, Q3_K, IQ4_XS → IQ4_NL; Q4_K → Q5_0; Q5_K → Q5_1; Q6_K → Q8_0; F16 if
///   still not whole 32-value blocks).
/// Errors: kUnsupported when a 32-value type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) meets a row
/// that is not whole blocks (llama-quantize stops there too).
Expected<DType> gguf_tensor_dtype(GgufFileType t, const ModelConfig& c, const std::string& name,
                                  std::span<const std::int64_t> shape);

}  // namespace peregrine

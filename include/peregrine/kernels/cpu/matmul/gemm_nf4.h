// y = x · Wᵀ for NF4 weights (DType::kNF4: QLoRA's NormalFloat-4 with double-quantized block
// absmaxes, one quantized tensor per row; quant/nf4.h) and f32 activations.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// y[t, o] = Σ_i W[o, i] · x[t, i] for the output rows o in [row_begin, row_end) and every token
/// t < n_tokens; other columns of y are left untouched. Single-threaded (matmul splits rows
/// across threads). w: [out, in] DType::kNF4 (rows of nf4_row_bytes(in) bytes), W[o, i] as
/// nf4_decode_row gives it (Dettmers et al. 2023). x: [n_tokens, in] f32; y: [n_tokens, out]
/// f32. Up to kNf4FusedTokens tokens on a CPU with 16 f32 lanes (AVX-512): a fused GEMV — per 32
/// weights the codes' nibbles looked up in the 16-value codebook held in one vector (vpermps)
/// and multiplied by the activations de-interleaved once per call, each block of 64 scaled by
/// its absmax — so the weights stream once at 4.13 bits each. Otherwise dequantize-then-multiply
/// (QLoRA's inference path): 64 rows at a time decoded to f32 (scalar) in a per-thread buffer and
/// multiplied by gemv_float / gemm_float.
/// Preconditions (checked by the model at load time; matmul.h): w.dtype is kNF4, in a multiple
/// of 64, 0 <= row_begin <= row_end <= out, x.size() == n_tokens·in, y.size() == n_tokens·out.
/// Scalar reference twin: matmul_reference (matmul.h).
/// Token counts up to which gemm_nf4 takes its fused GEMV (each token re-reads the row's codes
/// from L1).
inline constexpr std::int64_t kNf4FusedTokens = 4;

void gemm_nf4(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
              std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

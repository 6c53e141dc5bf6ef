// Prefill GEMM for BF16 weights on CPUs with AVX512_BF16: the activations are rounded to BF16
// and VDPBF16PS multiplies pairs of them by pairs of weights, adding both products to an f32
// accumulator — two multiply-adds per f32 lane per instruction, twice gemm_float's FMA rate.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// True when this CPU has AVX512F and AVX512_BF16 (Intel Cooper Lake / Sapphire Rapids on,
/// AMD Zen 4 on), so that gemm_bf16_dot can run.
bool gemm_bf16_dot_available();

/// True when gemm_bf16_dot takes `w`: a 2-D BF16 matrix with an even row length (its weights
/// are read in pairs) whose rows start 4-byte aligned.
bool gemm_bf16_dot_takes(const TensorView& w);

/// y[t, o] = Σ_i W[o, i] · bf16(x[t, i]) for the output rows o in [row_begin, row_end) and every
/// token t < n_tokens; other columns of y are left untouched. Single-threaded (callers split
/// rows across threads). bf16(v) rounds to nearest even (as PyTorch's .to(torch.bfloat16) and
/// llama.cpp's BF16 matmul do); products of two BF16 values are exact in f32, and the pairs
/// are accumulated in f32 (denormals flushed to zero, as VDPBF16PS does).
/// w: [out, in] row-major BF16 (gemm_bf16_dot_takes). x: [n_tokens, in] f32. y: [n_tokens,
/// out] f32.
/// Method: x is rounded into panels of 32 tokens, [in/2][32] pairs of BF16 per panel; for 12
/// output rows at a time the micro-kernel keeps 12 × 2 vectors of 16 f32 accumulators in
/// registers and, per pair of inputs, broadcasts each row's two weights (straight from W, no
/// repacking) against the two token vectors (Goto & van de Geijn's register blocking, with
/// Intel's "BF16 dot product" instruction, Intel SDM vol. 2, VDPBF16PS). Inputs are blocked by
/// 512 so that a panel's block of x stays in L1 while the rows stream.
/// Preconditions: gemm_bf16_dot_available(), gemm_bf16_dot_takes(w), 0 <= row_begin <= row_end
/// <= out, x.size() == n_tokens*in, y.size() == n_tokens*out.
/// Scalar reference twin: gemm_bf16_dot_reference.
void gemm_bf16_dot(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
                   std::int64_t row_begin, std::int64_t row_end);

/// Scalar twin of gemm_bf16_dot (same contract, any CPU): per output, the pairs (W[o, 2j],
/// W[o, 2j + 1]) times (bf16(x[t, 2j]), bf16(x[t, 2j + 1])) added in order of j in f32.
void gemm_bf16_dot_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                             std::span<float> y, std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

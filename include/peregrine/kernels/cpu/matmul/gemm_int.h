// y = x · Wᵀ for group-wise integer weights (DType::kInt) with f32 activations: W{2,3,4,8}A16,
// the run-time form of RTN / GPTQ / AWQ results.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// y[t, o] = Σ_i W[o, i] · x[t, i] for the output rows o in [row_begin, row_end) and every token
/// t < n_tokens; other columns of y are left untouched. Single-threaded (matmul splits rows
/// across threads).
/// w: [out, in] DType::kInt (layout in core/dtype.h: per row f16 group scales, uint8 zero
/// points when asymmetric, `bits`-bit codes packed LSB-first; rows at any byte alignment),
/// W[o, i] = scale_g · (q_i − zero_g) exactly as dequantize_int_row decodes it (any group size;
/// the last group may be partial). x: [n_tokens, in] f32. y: [n_tokens, out] f32.
/// Accumulates in f32. Highway SIMD (src/kernels/cpu/matmul/int_decode-inl.h): codes are unpacked a
/// unit at a time in the order that needs the fewest instructions (4 and 2 bits: the fields of
/// widened bytes by mask and shift; 3 bits, whose values cross bytes: a byte shuffle and a
/// per-lane shift; 8 bits: widened bytes), and the activations are staged in that same order.
/// 1 token: a fused decode GEMV — per group, Σ (q − zero)·x in registers, times the group's scale
/// once (the weights stream from memory once, the next row prefetched across 4 KiB pages);
/// fewer than kGemmMinTokens tokens: each block of kGemvRows rows decoded once to exact f32
/// weights (scale·q − scale·zero in one multiply-add) and reused for every token; more: the
/// packed GEMM of gemm_float with kInt weight blocks (decoded_matmul-inl.h).
/// Preconditions (checked by the model at load time; matmul.h): w.dtype == kInt,
/// w.quant.valid(), w.quant.act_bits == 16, w.nbytes == out · w.row_bytes(),
/// 0 <= row_begin <= row_end <= out, x.size() == n_tokens·in, y.size() == n_tokens·out.
/// Scalar reference twin: matmul_reference (matmul.h).
void gemm_int(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
              std::span<float> y, std::int64_t row_begin, std::int64_t row_end);

}  // namespace peregrine

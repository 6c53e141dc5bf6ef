// Per-token dynamic int8 quantization of activation rows, with LLM.int8()'s outlier columns:
// the left-hand side of the integer matmul of kInt weights with act_bits 8 (gemm_int8_act.h).
//
// Spec: SmoothQuant (Xiao et al. 2023) per-token dynamic quantization, s_x = max|x_t| / 127;
// LLM.int8() (Dettmers et al. 2022) mixed-precision decomposition: the input features where
// some token reaches the outlier threshold are taken out of the int8 product (here: computed
// in f32 against the dequantized weight columns).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace peregrine {

/// A batch of activation rows quantized per token: value i of token t ≈ scale[t] · q[t·in + i],
/// except in the outlier columns, where q is 0 and the f32 value is used instead.
struct TokenQuantizedActivations {
  std::int64_t n_tokens = 0;
  std::int64_t in = 0;
  std::vector<std::int64_t> outliers;  // ascending input columns c with |x[t, c]| >= threshold for some t
  std::vector<float> scale;            // [n_tokens] s_x = max over non-outlier columns of |x[t, ·]| / 127
  std::vector<std::int8_t> q;          // [n_tokens, in]
};

/// Quantizes x: [n_tokens, in] f32 into `out` (resized; buffers reused across calls). Outlier
/// columns: those where some token has |x| >= outlier_threshold when outlier_threshold > 0,
/// none when it is 0. Per token t: s = (max of |x[t, c]| over the other columns) / 127,
/// q[t, c] = nearest-even(x[t, c] · (1/s)) ∈ [-127, 127] (0 when s = 0 and in outlier columns),
/// so |x − s·q| <= s/2 up to the f32 rounding of 1/s and of the product. Highway SIMD.
/// Preconditions: n_tokens >= 0, in >= 0, x.size() == n_tokens·in, x finite,
/// outlier_threshold >= 0.
void quantize_tokens(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                     float outlier_threshold, TokenQuantizedActivations& out);

/// Scalar twin of quantize_tokens (same arithmetic, so the results are identical).
void quantize_tokens_reference(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                               float outlier_threshold, TokenQuantizedActivations& out);

}  // namespace peregrine

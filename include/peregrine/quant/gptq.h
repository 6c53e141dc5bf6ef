// GPTQ (Frantar et al., ICLR 2023, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers", Algorithm 1): quantizes a weight matrix column by column, each
// column's rounding error spread onto the not-yet-quantized columns through the inverse Hessian
// of the layer's reconstruction loss ||W X - Ŵ X||².
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

struct GptqOptions {
  QuantParams params;              // bits, group_size (cols for per-channel), asymmetric
  double damp_percent = 0.01;      // λ = damp_percent · mean(diag H) added to the diagonal
  std::int64_t block_size = 128;   // lazy batch updates: columns per block (B in the paper)
  bool act_order = false;          // process columns by decreasing diag(H) ("desc_act"); groups
                                   // stay the natural column ranges (AutoGPTQ's static_groups),
                                   // so the result needs no g_idx permutation at run time
};

struct GptqResult {
  std::vector<std::uint8_t> packed;  // [rows * row_bytes(kInt, params, cols)]: kInt rows
  std::vector<float> dequantized;    // [rows, cols]: what `packed` decodes to
  double loss = 0.0;                 // Σ over rows and columns of (w - q)² / U_jj² / 2, U_jj² =
                                     // [H_F⁻¹]_jj over the not-yet-quantized columns F (the
                                     // paper's OBS proxy loss, for reporting)
};

/// Quantizes w [rows, cols] f32 row-major (a Linear weight {out, in}) given
/// hessian [cols, cols] f64 row-major = (2/n) Σ_t x_t x_tᵀ over n calibration inputs x_t [cols].
/// Group scales/zeros are RTN parameters (quant/int_group.h) of each group's current (error-
/// updated) weights, computed when GPTQ reaches the group's first column (natural order) or,
/// with act_order, from the original weights before the sweep (static groups).
/// Dead inputs (H_jj == 0) get H_jj = 1 and their weights zeroed, as in the reference code.
/// Steps: H += λI; H⁻¹ by Cholesky (Eigen); U = upper Cholesky factor of H⁻¹; for each block of
/// columns, quantize column j, err = (w_j - q_j) / U_jj, update the block's later columns with
/// err · U_j,(j+1..), then the columns after the block in one matrix product.
/// Each row's sweep is independent: `pool`, when given, runs fixed tiles of rows in parallel
/// (the result does not depend on it).
/// Errors: kInvalidArgument (sizes, !params.valid(), group_size > cols, block_size < 1,
/// damp_percent < 0, a non-finite value in w or hessian; H + λI not positive definite after 10
/// retries that each double λ: the message says so and suggests a larger damp_percent).
Expected<GptqResult> gptq_quantize(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                   std::span<const double> hessian, const GptqOptions& o,
                                   ThreadPool* pool = nullptr);

}  // namespace peregrine

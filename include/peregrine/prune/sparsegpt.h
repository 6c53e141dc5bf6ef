// SparseGPT (Frantar & Alistarh, ICML 2023, "SparseGPT: Massive Language Models Can Be
// Accurately Pruned in One-Shot", Algorithm 1): prunes a weight matrix column by column, each
// removed (or quantized) weight's error spread onto the not-yet-visited columns through the
// inverse Hessian of the layer's reconstruction loss ||W X − Ŵ X||² — the OBS update that GPTQ
// also uses (quant/hessian_factor.h) — with the mask chosen adaptively as the sweep goes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/prune/sparsity.h"

namespace peregrine {

struct SparseGptOptions {
  SparsityTarget target;
  double damp_percent = 0.01;        // λ = damp_percent · mean(diag H) added to the diagonal
  std::int64_t block_size = 128;     // lazy batch updates and unstructured mask blocks (Bs)
  std::optional<QuantParams> quant;  // joint sparsify + quantize: the kept weights get kInt codes
                                     // (bits, group_size, asymmetric) as GPTQ does, a group's
                                     // RTN parameters taken from its error-updated kept weights
                                     // when the sweep reaches its first column
};

struct SparseGptResult {
  std::vector<float> weights;        // [rows, cols]: pruned (and, with quant, dequantized) W
  std::vector<std::uint8_t> keep;    // [rows, cols]: 1 where a weight stays
  std::vector<std::uint8_t> packed;  // with quant: [rows * row_bytes(kInt, quant, cols)] kInt rows
  double loss = 0.0;                 // Σ (w − ŵ)² / [H⁻¹]_jj² / 2 over the sweep (the OBS proxy)
};

/// Prunes w [rows, cols] f32 row-major (a Linear weight {out, in}) given hessian [cols, cols] f64
/// row-major = (2/n) Σ_t x_t x_tᵀ over n calibration inputs.
/// Mask selection (the paper's adaptive blocks): unstructured targets choose, at the start of
/// each block of block_size columns, which round(sparsity · block) weights of each row to prune
/// by the OBS saliency w² / [U]_jj² of the current (error-updated) weights; per row rather than
/// over the whole block as the reference code does, so rows stay independent (each row ends at
/// the target sparsity). N:M targets choose the n kept weights of every m-column group when
/// the sweep reaches it — with quant, every m-group of a quantization group at the group's first
/// column, so the group's scale sees the weights it will hold. block_size is rounded up to a
/// multiple of those units. When m does not divide cols, the last cols % m columns stay (a tail
/// the pattern cannot cover; prune/sparsity.h select_mask does the same).
/// Dead inputs (H_jj == 0) get H_jj = 1 and their weights zeroed, as in the reference code.
/// Rows are processed in fixed tiles on `pool` (the result does not depend on it).
/// Errors: kInvalidArgument (sizes, target.validate(), quant invalid or
/// its group_size not a multiple of m, block_size < 1, damp_percent < 0, non-finite input, H + λI
/// that stays indefinite).
Expected<SparseGptResult> sparsegpt_prune(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                          std::span<const double> hessian, const SparseGptOptions& o,
                                          ThreadPool* pool = nullptr);

}  // namespace peregrine

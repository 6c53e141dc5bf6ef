// y = x · Wᵀ for N:M sparse weights of any kept dtype (core/dtype.h: f16/bf16/q8_0/q4_0 ×
// 2:4 / 4:8; Mishra et al. 2021, "Accelerating Sparse Deep Neural Networks") without a packed
// copy: the prefill path of the packed 2:4 F16/BF16 GEMV (sparse_nm_packed.h) and the path of
// every other sparse dtype. Panels of rows are decoded to dense f32 (reading only the kept
// values and the masks from memory) into a per-thread buffer that the float GEMM / GEMV tiles
// (gemm_float.h, gemv_float.h) multiply.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// Rows decoded per panel: 4 × the GEMM's 12-row tile, 48 · in f32 (384 KiB at in = 2048).
inline constexpr std::int64_t kSparsePanelRows = 48;

/// w: [out, in], an N:M sparse dtype (sparse_nm_format has a value). x: [n_tokens, in] f32.
/// y: [n_tokens, out] f32, overwritten. Per panel of kSparsePanelRows rows: rows decoded by
/// expand_sparse_nm_row (sparse_nm_expand.h), then gemm_float from kGemmMinTokens tokens on, gemv_float below (each dot
/// product accumulated in f32, pruned columns included as zeros). Rows split across `pool` in
/// whole panels; on the calling thread below `min_parallel_macs` dense multiply-adds (matmul.h).
/// Preconditions: x.size() == n_tokens·in, y.size() == n_tokens·out, the masks valid
/// (quant/sparse_nm.h validate_sparse_nm); not called from inside a pool.parallel_for.
/// Reference: matmul_reference (matmul.h).
void matmul_sparse_nm(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
                      ThreadPool& pool, std::int64_t min_parallel_macs);

}  // namespace peregrine

// LoRA's "expand" product (Punica's SGMV expand, Chen et al. 2023): the rank-r intermediate
// t = x·Aᵀ of a few rows, multiplied by B and added into those rows' outputs, reading B once
// (stored transposed, in column panels).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// Columns per panel of lora_expand's Bᵀ layout; callers splitting columns across threads
/// should split at multiples of it (any split is correct).
inline constexpr std::int64_t kLoraExpandCols = 64;

/// Elements of Bᵀ [rank, out] in lora_expand's panel layout: ceil(out / kLoraExpandCols)
/// panels of [rank, kLoraExpandCols] (the last panel's columns past `out` are padding).
inline std::int64_t lora_panel_elements(std::int64_t rank, std::int64_t out) {
  return (out + kLoraExpandCols - 1) / kLoraExpandCols * kLoraExpandCols * rank;
}

/// Where Bᵀ[k, c] sits in the panel layout of a Bᵀ with `rank` rows: panel c / kLoraExpandCols
/// holds columns [64p, 64p + 64) as [rank, 64] row-major, so one thread's columns of one
/// adapter are one sequential stream (row-major Bᵀ would be `rank` streams of 128 bytes each
/// per block, strided by the output width).
inline std::int64_t lora_panel_index(std::int64_t rank, std::int64_t k, std::int64_t c) {
  return (c / kLoraExpandCols) * rank * kLoraExpandCols + k * kLoraExpandCols + c % kLoraExpandCols;
}

/// For j < m and every column c in [col_begin, col_end):
///   y[rows[j] · out + c] += scale · Σ_{k < rank} t[j · rank + k] · Bᵀ[k, c].
/// bt: Bᵀ (B [out, rank] transposed), shape [rank, out], its values in the panel layout
/// (lora_panel_index; lora_panel_elements values, padding included), dtype F32, F16 or BF16,
/// at any byte alignment. t: [m, rank] f32. y: f32 rows of length out (out = bt.shape[1])
/// indexed by rows[j] < y.size() / out; other columns are left untouched. Single-threaded
/// (callers split the columns across threads).
/// Memory-bound (2·m FLOPs per stored value of Bᵀ): Highway SIMD, up to 4 vectors of columns ×
/// 4 rows of accumulators in registers, the y values loaded and stored once per block, B's
/// values widened in registers from their stored dtype. Accumulates in f32; the sum over k runs
/// in order k = 0, 1, ... per column. Preconditions: float dtype, 0 <= col_begin <= col_end <=
/// out, t.size() >= m · rank, rows.size() >= m.
/// Scalar reference twin: lora_expand_reference (same contract, same summation order per column).
void lora_expand(const TensorView& bt, std::span<const float> t, std::int64_t m, float scale, std::span<float> y,
                 std::span<const std::int64_t> rows, std::int64_t col_begin, std::int64_t col_end);

/// Scalar twin of lora_expand: per row and column, Σ_k t[j, k] · bt[k, c] in f32 in order k = 0,
/// 1, ..., times scale, added to y.
void lora_expand_reference(const TensorView& bt, std::span<const float> t, std::int64_t m, float scale,
                           std::span<float> y, std::span<const std::int64_t> rows, std::int64_t col_begin,
                           std::int64_t col_end);

}  // namespace peregrine

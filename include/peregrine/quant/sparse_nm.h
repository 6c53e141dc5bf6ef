// N:M semi-structured sparse weights (2:4 and 4:8): encoding a pruned f32 matrix into the
// compressed dtypes of core/dtype.h (kept values + a 1-bit-per-column mask), decoding a row and
// validating stored masks.
//
// Spec: Mishra et al. 2021, "Accelerating Sparse Deep Neural Networks" (NVIDIA's 2:4
// fine-grained structured sparsity: at most N nonzeros in every M consecutive input values of a
// row); the kept values of the Q8_0 / Q4_0 variants are ggml's blocks (quant/quantize_rtn.h) over
// 32 consecutive kept values of a row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"

namespace peregrine {

/// How the kept values are stored: F16, BF16, Q8_0 blocks or Q4_0 blocks.
enum class SparseBase : std::uint8_t { kF16, kBF16, kQ8, kQ4 };

/// N nonzeros at most in every M consecutive values of a row; supported: 2:4 and 4:8.
struct SparsePattern {
  int n = 2;
  int m = 4;
};

/// An encoded matrix: `bytes` holds rows × dtype_row_bytes(dtype, cols) bytes in the layout of
/// core/dtype.h, ready to become a TensorView {dtype, shape {rows, cols}} (the logical dense
/// shape; no QuantParams).
struct SparseEncoded {
  DType dtype = DType::kF16_S24;
  std::vector<std::uint8_t> bytes;
};

/// The compressed dtype for (base, pattern), e.g. (kQ4, 2:4) → kQ4_0_S24. Errors:
/// kUnsupported for a pattern other than 2:4 and 4:8.
Expected<DType> sparse_nm_dtype(SparseBase base, SparsePattern p);

/// Encodes `w` [rows, cols] f32 row-major (a Linear weight {out, in}) whose every group of m
/// consecutive values of a row has at most n nonzeros (-0 counts as zero). Each group keeps its
/// nonzeros and, when it has fewer than n, its first zero columns, in column order; the kept
/// values are rounded to F16 / BF16 (round-to-nearest-even) or quantized exactly as
/// quantize_rtn(kQ8_0 / kQ4_0) over blocks of 32 consecutive kept values of a row.
/// Errors: kUnsupported for a pattern other than 2:4 / 4:8; kInvalidArgument when rows < 1,
/// cols < 1, w.size() != rows·cols, cols is not a multiple of m, for kQ8 / kQ4 the kept values
/// per row (cols·n/m) are not a multiple of 32 (the caller then stores the matrix dense), or a
/// group has more than n nonzeros (the message names the row and group).
Expected<SparseEncoded> encode_sparse_nm(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                         SparsePattern p, SparseBase base);

/// Decodes one stored row of N:M sparse dtype `t` (`src`: dtype_row_bytes(t, out.size()) bytes)
/// into the dense row `out` (zeros where pruned). A mask that breaks the layout (a group without
/// exactly n set bits) decodes to unspecified values but never reads or writes outside `src` /
/// `out`; validate_sparse_nm rejects such tensors at load.
/// Precondition: sparse_nm_format(t) has a value and dtype_row_bytes(t, out.size()) too.
void decode_sparse_nm_row(DType t, const std::uint8_t* src, std::span<float> out);

/// Checks every row's mask of `w` (an N:M sparse dtype, w.nbytes == n_rows · row bytes): exactly
/// n set bits per group of m columns, padding bits zero. Errors: kInvalidArgument naming the
/// tensor, row and group of the first violation (or a dtype / size mismatch). Cost: one pass
/// over the mask bytes (1 bit per column).
Status validate_sparse_nm(const TensorView& w);

}  // namespace peregrine

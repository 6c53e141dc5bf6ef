// One row of N:M sparse weights (core/dtype.h: f16/bf16/q8_0/q4_0 × 2:4 / 4:8) decoded to dense
// f32 for the panel GEMM of sparse_nm_matmul.h: the kept values are decoded where they lie
// (quant/dequantize.h), then moved to their columns 16 at a time with AVX-512F's masked
// expand-load (vexpandps: the mask bits of 16 columns pick which lanes take the next kept
// values, the others get 0), from the last columns down so that it works in place. Highway 1.0
// has no Expand op, hence the intrinsics under a target attribute and a run-time CPU check.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"

namespace peregrine {

/// out [w.row_length()] f32 = row `r` of `w` (an N:M sparse dtype) with zeros where pruned:
/// decode_sparse_nm_row's values (its reference twin, which tests compare against bit for bit)
/// for any row whose mask marks exactly its kept count of columns; other rows (a corrupt mask)
/// go through decode_sparse_nm_row itself. Scalar expansion where the CPU lacks AVX-512F.
/// Preconditions: sparse_nm_format(w.dtype) has a value, 0 <= r < w.n_rows(), out.size() ==
/// w.row_length().
void expand_sparse_nm_row(const TensorView& w, std::int64_t r, std::span<float> out);

}  // namespace peregrine

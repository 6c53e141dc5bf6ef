// The common decoded form of ggml's block formats that gemm_ggml multiplies (see gemm_ggml.h):
// per super-group of 256 values, unsigned codes u and per-16 scale a and offset b with
// w_i = a_{i/16}·u_i + b_{i/16}.
#pragma once

#include <cstddef>
#include <cstdint>

#include "peregrine/core/dtype.h"

namespace peregrine {

inline constexpr int kSuperGroup = 256;

struct UnpackedSuperGroup {
  alignas(64) std::uint8_t u[kSuperGroup];
  alignas(64) float a[kSuperGroup / 16];
  alignas(64) float b[kSuperGroup / 16];
};

/// Bytes of one super-group of `t`: one block of the K-quants / IQ4_XS, 8 blocks of the
/// 32-value formats.
std::size_t super_group_bytes(DType t);

/// Decodes the super-group at `src` holding `blocks` blocks of t (1 for the K-quants and
/// IQ4_XS; 1..8 for the 32-value formats, the rest of `out` zero). Scalar; the reference of the
/// SIMD unpacking in gemm_ggml. Precondition: is_ggml_gemm_dtype(t).
void unpack_super_group(DType t, const std::uint8_t* src, int blocks, UnpackedSuperGroup& out);

}  // namespace peregrine

// 2:4 sparse F16 / BF16 weights (core/dtype.h f16_s24, bf16_s24; Mishra et al. 2021,
// "Accelerating Sparse Deep Neural Networks") repacked at load for the decode GEMV, reading only
// the kept values and 2 bits of position per kept value: 1.125 bytes per weight against the
// dense packed F16 GEMV's 2 (half_packed.h), the same rows-in-lanes scheme.
//
// Layout of a group of 16 rows (rows in lanes) of an [out, in] matrix: chunks of 16 columns (4
// groups of 4 columns; the last chunk zero-padded past in / 4 groups), each 288 bytes:
//   u16 pos[16]        lane e: bits [2s, 2s + 2) = the column within its group (0..3) of slot s
//                      of row e, slot s = 2·j + k the k-th kept value (k < 2) of group j (j < 4)
//   u16 value[8][16]   slot s, lane e: the kept value's F16 / BF16 bits
// chunks in column order, groups of 16 rows in row order. The kernel broadcasts a group's 4
// activations to every 128-bit block of a vector and picks each lane's activation with one
// in-block permute (vpermilps) by the lane's 2 position bits, then one FMA per vector of kept
// values (16 on AVX-512, 8 on AVX2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"

namespace peregrine {

/// Rows per interleaved group.
inline constexpr std::int64_t kSparsePackRows = 16;

/// Token rows the packed sparse GEMV takes (4 at a time per group, the group staying in L1/L2
/// between them); from kGemmMinTokens on matmul decodes panels for the GEMM (sparse_nm_matmul.h).
inline constexpr std::int64_t kSparsePackedTokens = 31;

/// Whether this CPU runs the packed sparse GEMV's SIMD kernel (AVX-512, or AVX2 with F16C and
/// FMA: 8 lanes, the group's 16 rows in two passes); without it the model does not pack.
bool sparse_packed_gemv_available();

/// Whether `w` can be packed: dtype kF16_S24 or kBF16_S24, 2-D, rows a whole number of 16-row
/// groups, nbytes == out · row bytes.
bool sparse_packable(const TensorView& w);

/// Bytes of the packed copy of `w` (sparse_packable): out / 16 groups × ceil(in / 16) chunks of
/// 288 bytes (= w.nbytes when in is a multiple of 16).
std::size_t sparse_packed_bytes(const TensorView& w);

/// Repacks `w` (sparse_packable) into the layout above, in the first sparse_packed_bytes(w)
/// bytes of `dst`. Errors: kInvalidArgument when !sparse_packable(w), dst is too short, or a
/// group's position mask does not mark exactly 2 columns (naming row and group).
Status pack_sparse_nm(const TensorView& w, std::span<std::uint8_t> dst);

/// y = x · Wᵀ for every product (each w with w->packed set by pack_sparse_nm, dtype kF16_S24 or
/// kBF16_S24, logical shape [out, in]; x [n_tokens, in] f32; y [n_tokens, out] f32, overwritten):
/// per token and row y[t, o] = Σ over the kept values W[o, i] · x[t, i] in f32 fused
/// multiply-adds, the kept values of each 16-column chunk dealt by slot to 4 partial sums (slot
/// s to s mod 4), added as (s0 + s1) + (s2 + s3) — the scalar twin's order, so both give the same
/// bits (pruned columns are never read: an inf / NaN activation there does not reach y). Rows
/// split over the pool as one range of whole 16-row groups (guided); on the calling thread below
/// `min_parallel_macs` (dense multiply-adds, as matmul.h counts them). Preconditions: every w
/// packed, n_tokens in [1, kSparsePackedTokens], sizes as stated; not called from inside a
/// pool.parallel_for.
void gemv_sparse_packed(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                        std::int64_t min_parallel_macs);

/// Scalar twin over the packed layout (std::fma in the order above): the same bits as
/// gemv_sparse_packed, and matmul_reference up to summation order.
void gemv_sparse_packed_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                                  std::span<float> y);

}  // namespace peregrine

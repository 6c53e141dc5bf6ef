// F16 and BF16 weights repacked at load time for the decode GEMV: 16 rows interleaved, so that
// one column of the 16 rows is one 32-byte load, widened to a 16-lane f32 vector and multiplied
// by one broadcast activation (rows in lanes; llama.cpp's CPU "repack" buffers do the same for
// its quantized types). The row-major GEMV (gemv_float.h) reads kGemvRows rows as as many
// streams, ends each row with a horizontal sum and stores one output at a time; here each
// thread reads its groups as one sequential stream and stores 16 outputs at once. Measured on
// the tinyllama F16 matrices (2 MiB pages, 1 thread, same run): 33 -> 39 GB/s.
//
// Layout of a group of 16 rows (g = row / 16) of a [out, in] matrix: 16·in values, column i at
// g·16·in + 16·i, row e of the group at lane e; groups in row order. The same values and bytes as
// the row-major matrix, only moved.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"

namespace peregrine {

/// Rows per interleaved group.
inline constexpr std::int64_t kHalfPackRows = 16;

/// Token rows the packed GEMV takes: fewer than the prefill GEMM's kGemmMinTokens (its panels
/// pay from there), 4 at a time per group, the group staying in L1/L2 between them.
inline constexpr std::int64_t kHalfPackedTokens = 31;

/// Whether the kernel level runs the packed GEMV's SIMD kernel (AVX-512: one group column per
/// 16-lane f32 vector; AVX2: two 8-lane vectors); without it packing would only cost memory, so
/// the model does not pack.
bool half_packed_gemv_available();

/// Whether `w` can be packed: dtype kF16 or kBF16, 2-D, rows a whole number of 16-row groups,
/// nbytes == 2·out·in.
bool half_packable(const TensorView& w);

/// Repacks `w` ([out, in] F16 / BF16, half_packable) into the layout above, in the first
/// w.nbytes bytes of `dst` (LlamaModel packs into one HugePageBuffer). Errors: kInvalidArgument
/// when !half_packable(w) or dst is shorter than w.nbytes.
Status pack_half(const TensorView& w, std::span<std::uint8_t> dst);

/// y = x · Wᵀ for every product (e.g. a layer's Q, K and V of one input; each w with w->packed
/// set by pack_half, w->dtype F16 or BF16, [out, in]; x [n_tokens, in] f32; y [n_tokens, out]
/// f32, overwritten): per token and row,
/// y[t, o] = Σ_i W[o, i] · x[t, i] in f32 fused multiply-adds, the columns i dealt round-robin
/// to 4 partial sums (i mod 4) that are added as (s0 + s1) + (s2 + s3) — the order of the scalar
/// twin, so both give the same bits. The products' rows are split over the pool as one range
/// (guided, whole 16-row groups): one parallel region; on the calling thread below
/// `min_parallel_macs` multiply-adds in all (see matmul.h). Preconditions: every w packed
/// (half_packable), n_tokens in [1, kHalfPackedTokens], x.size() == n_tokens·in and y.size()
/// == n_tokens·out per product; not called from inside a pool.parallel_for.
void gemv_half_packed(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                      std::int64_t min_parallel_macs);

/// Scalar twin over the packed layout (std::fma in the order gemv_half_packed documents):
/// equal to the SIMD kernel bit for bit, and to float_matmul_reference up to summation order.
void gemv_half_packed_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                                std::span<float> y);

}  // namespace peregrine

// Decode GEMV for the quantized N:M sparse dtypes (q8_0_s24, q4_0_s24, q8_0_s48, q4_0_s48;
// core/dtype.h) against Q8_0-quantized activations (quantize_activations.h, blocks of 32),
// reading only the kept codes and the masks. Both patterns keep exactly 16 of every 32
// columns, so a stored block of 32 kept values spans 64 columns — two activation blocks, 16
// kept values in each. Per row and block the mask's 64 bits select the 32 activation bytes
// under the kept columns (AVX-512 VBMI2 vpcompressb), which meet the 32 codes in vpdpbusd
// (Q4_0: nibbles as unsigned, −8 · Σx subtracted; Q8_0: |w| against x · sign(w), ggml's trick):
// eight int32 sums, four per activation block, each scaled by d_w · d_x; two blocks per 512-bit
// step, into sixteen f32 lanes.
// Mishra et al. 2021 (N:M sparsity); ggml's vec_dot_q4_0_q8_0 for the block arithmetic.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine {

/// Token counts up to which matmul takes this GEMV for the quantized sparse dtypes (above: the
/// panel GEMM of sparse_nm_matmul.h).
inline constexpr std::int64_t kSparseQ8Tokens = 8;

/// Whether this CPU runs gemv_sparse_q8 (AVX-512 F/BW/VL, VNNI and VBMI2).
bool sparse_q8_supported();

/// w: [out, in] in one of the four dtypes above (in a multiple of 64; masks valid: quant/
/// sparse_nm.h validate_sparse_nm). xq: x [n_tokens, in] in blocks of 32 (kActivationBlockQ8_0).
/// y: [n_tokens, out] f32, overwritten with
///   y[t, o] = Σ over stored blocks b, lanes l < 8 of (d_x[t, 2b + l/4] · d_w[o, b]) · S(o, b, l, t),
///   S = Σ_{j = 4l}^{4l+3} q_w[o, 32b + j] · q_x[t, column of kept value 32b + j] (int32, exact),
/// accumulated with fused multiply-adds into lane l (even b) or 8 + l (odd b), the sixteen lanes
/// summed as gemv_sparse_q8_reference does — which gives the same bits. Rows split over `pool` (on the calling thread below
/// min_parallel_macs dense multiply-adds). Precondition: sparse_q8_supported().
void gemv_sparse_q8(const TensorView& w, const QuantizedActivations& xq, std::span<float> y, ThreadPool& pool,
                    std::int64_t min_parallel_macs);

/// Scalar twin of gemv_sparse_q8 (any CPU), the same formula in the same order.
void gemv_sparse_q8_reference(const TensorView& w, const QuantizedActivations& xq, std::span<float> y);

}  // namespace peregrine

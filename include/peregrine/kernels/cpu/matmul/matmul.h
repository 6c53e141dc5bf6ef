// y = x · Wᵀ for a weight matrix in any stored dtype (the Linear layer of every projection).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// w: [out, in] row-major in dtype F32/F16/BF16, a ggml block format (Q8_0, Q4_0, Q4_1, Q5_0,
/// Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS; GGUF block layout, rows whole blocks), kInt (group-wise integer, w.quant valid), F8_E4M3/F8_E5M2 or an N:M sparse dtype (core/dtype.h; rows at
/// any byte alignment). x: [n_tokens, in] f32. y: [n_tokens, out] f32 (overwritten).
/// Threaded over output rows; each weight row is decoded once and reused for every token
/// (prefill reads the weights once, decode is the n_tokens == 1 GEMV). Accumulates in f32.
/// BF16 weights, in the default Bf16Activations::kBf16 mode (bf16_activations.h): x is rounded
/// to BF16 (nearest even) on every path, as PyTorch's and llama.cpp's BF16 linears do, so that
/// the prefill GEMM can run as VDPBF16PS pair dot products (gemm_bf16_dot.h; twice the f32 FMA
/// rate; from kGemmMinTokens tokens on) and packed BF16 below that as gemv_bf16_dot's
/// (gemv_bf16_dot.h), where the CPU has AVX512_BF16; elsewhere x is rounded first. The
/// products of two BF16 values are exact in f32. In the kF32 mode x is used as given.
/// Q8_0/Q4_0 weights: x is quantized to 8-bit blocks of 32 once per call and the product runs
/// as integer block dot products (quantize_activations.h, gemm_quant.h), like llama.cpp; y then
/// differs from the f32-activation product by the activation rounding, at most
/// Σ_blocks (amax_b(x)/254)·Σ_{i∈b}|w_i| (plus f32 summation error). The other ggml block
/// formats run through gemm_ggml.h on the activation blocks ggml pairs them with
/// (ggml_activation_block: blocks of 32 for Q4_1 / Q5_0 / Q5_1 / IQ4_NL, of 256 — Q8_K — for
/// the K-quants and IQ4_XS; the same bound over those blocks).
/// kInt with act_bits 16 and FP8: the weights decoded exactly as dequantize_row does, times the
/// f32 activations (gemm_int.h, gemm_fp8.h). kInt with act_bits 8: per-token int8 activations
/// and int32 group dot products, LLM.int8() outlier columns in f32 (gemm_int8_act.h).
/// N:M sparse dtypes (f16_s24 … q4_0_s48; masks valid): packed 2:4 F16 / BF16 (w.packed) take
/// gemv_sparse_packed up to kSparsePackedTokens tokens (only kept values multiplied,
/// sparse_nm_packed.h); packed 2:4 Q4_0 / Q8_0 gemv_sparse_q8_packed at every token count
/// against Q8_0 activation blocks (sparse_nm_q8_packed.h); unpacked
/// quantized ones gemv_sparse_q8 up to kSparseQ8Tokens (sparse_nm_q8.h); everything else
/// matmul_sparse_nm (panels decoded exactly to f32, then the float tiles: sparse_nm_matmul.h).
/// Products smaller than `min_parallel_macs` multiply-adds run on the calling thread: waking
/// the workers costs tens of microseconds, more than stories260K's 64×64 … 512×64 decode
/// products take (measured: decode 558 → ~6600 tokens/s with -t 2); 0 forces the threaded path.
/// Preconditions (checked by the model at load time): w.dtype is one of the above (not kI8),
/// w.row_bytes() has a value (kInt: w.quant.valid()) and w.nbytes == out·row_bytes,
/// x.size() == n_tokens*in, y.size() == n_tokens*out; kInt with act_bits 8: x finite.
inline constexpr std::int64_t kMinParallelMacs = std::int64_t{1} << 18;
void matmul(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
            std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs = kMinParallelMacs);

/// One product of matmul_fused: weights `w` [out, in], its input x [n_tokens, in] f32 and its
/// output y [n_tokens, out] f32.
struct MatmulProduct {
  const TensorView* w;
  std::span<const float> x;
  std::span<float> y;
};

/// y_i = x_i · W_iᵀ for every product — of one input (a layer's Q, K and V; the FFN's gate and
/// up) or of several (the down projections of one token's experts) — with the same results as
/// one matmul each. When every W_i is Q4_0 or Q8_0 packed at load (kernels/cpu/matmul/quant_packed.h), or
/// 2:4 Q4_0 / Q8_0 packed at load (sparse_nm_q8_packed.h), each
/// distinct input (by address) is quantized once and all the products run in one parallel
/// region (likewise packed F16 / BF16, dense or 2:4, without the quantization) (one start and one tail instead of one per
/// matrix); otherwise they run one matmul after the other. Preconditions: those of matmul for
/// each product.
void matmul_fused(std::span<const MatmulProduct> products, std::int64_t n_tokens, ThreadPool& pool,
                  std::int64_t min_parallel_macs = kMinParallelMacs);

/// Scalar single-threaded reference twin of matmul: every row decoded by dequantize_row
/// (quant/dequantize.h), then a naive triple loop with f64 accumulation (the products of the
/// stored weights with x exact, their sum in f64), rounded to f32 once; BF16 weights take x
/// rounded to BF16 first in the kBf16 mode, as matmul does. kInt weights with act_bits 8 instead reproduce the
/// kernel's activation quantization (quantize_tokens_reference: per-token int8, LLM.int8()
/// outlier columns) and evaluate gemm_int8_act's formula in int64 / f64
/// (gemm_int8_act_reference). Tests compare matmul against it.
void matmul_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                      std::span<float> y);

}  // namespace peregrine

// y = x · Wᵀ for ggml's block formats beyond Q8_0 / Q4_0 — Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_XS (layouts: quant/ggml_blocks.h) — with 8-bit activation blocks and
// integer dot products, as llama.cpp's ggml_vec_dot_<type>_q8_K / _q8_0 / _q8_1.
//
// Every format is handled in super-groups of 256 values (one K-quant / IQ4_XS block, or 8 legacy
// blocks of 32) decoded to one common form: unsigned 8-bit codes u_i (0..255) and, per 16
// values s, an f32 scale a_s and offset b_s with w_i = a_s·u_i + b_s (Q4_K: a = d·scale,
// b = −dmin·min; Q6_K: u = q + 32, b = −32·a; IQ4: u = grid value + 128, b = −128·a; ...).
// With activations x ≈ dx_k·q_i (8-bit blocks k of 32 or 256, quantize_activations.h),
//   y[t, o] = Σ_s [ a_s · dx_k(s) · Σ_{i∈s} u_i·q_i  +  b_s · dx_k(s) · Σ_{i∈s} q_i ],
// the inner sums exact in int32, the rest in f32. The K-quants and IQ4_XS take activation
// blocks of 256 (ggml's Q8_K: ggml_activation_block), so where a_s = d·sc_s with an integer
// sub-block scale sc_s, decode sums Σ_s sc_s·Σ u_i·q_i over the whole super-block in int32 and
// converts once (ggml_vec_dot_q4_K_q8_K's order of operations).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine {

/// Quantized activations in the layout gemm_ggml reads: rows padded with zeros to whole
/// super-groups of 256 values.
struct GgmlActivations {
  std::int64_t n_tokens = 0;
  std::int64_t in = 0;          // values per row (a multiple of block)
  std::int64_t ld = 0;          // padded row length, a multiple of 256
  std::int64_t block = 32;      // values per activation scale: 32 or 256
  std::vector<std::int8_t> q;   // [n_tokens, ld] int8 values (0 in the padding)
  std::vector<std::int8_t> qt;  // n_tokens <= kGgmlGemvMaxTokens, else empty: [n_tokens, ld],
                                // q with each super-group's 16-value sub-blocks in 32-bit
                                // lanes (byte 64r + 16k + 4m + j = value 64m + 16k + 4r + j),
                                // the AVX-512 decode GEMVs' order
  std::vector<float> dx16t;     // alike: [n_tokens, ld / 16], per super-group lane 4k + m = the
                                // scale of the block holding sub-block 4m + k (qt's lanes)
  std::vector<float> dx;        // [n_tokens, ld / 64, 16]: per 64 values, lane l holds the
                                // scale of the block holding values 4l .. 4l+3 of that chunk
                                // (the int32 lanes of a 64-byte dot product over it)
  std::vector<float> sum16;     // [n_tokens, ld / 16]: dx_k · Σ q_i over each 16 values; for
                                // Q4_1 / Q5_1 weights half of Q8_1's block sum s on each 16
};

/// The most tokens gemm_ggml's decode GEMVs take (more go to the prefill panels, which read q).
inline constexpr std::int64_t kGgmlGemvMaxTokens = 8;

/// Lays out `xq` ([n_tokens, in] 8-bit blocks of 32 or 256) for gemm_ggml with weights of
/// dtype `weights` (out's buffers are reused).
void prepare_ggml_activations(const QuantizedActivations& xq, DType weights, GgmlActivations& out);

/// The activation block gemm_ggml takes for weights of dtype t, ggml's vec_dot_type: 256 (Q8_K)
/// for Q2_K..Q6_K and IQ4_XS, 32 (Q8_0) for Q4_1, Q5_0, Q5_1 and IQ4_NL.
std::int64_t ggml_activation_block(DType t);

/// Whether gemm_ggml handles dtype t (the formats listed above).
bool is_ggml_gemm_dtype(DType t);

/// w: [out, in] in one of the formats above (rows of whole blocks: in % 256 == 0 for the
/// K-quants and IQ4_XS, in % 32 == 0 for the rest; any byte alignment). xa: the activations
/// [n_tokens, in]. y: [n_tokens, out] f32, overwritten with the formula in the file comment.
/// x86 with AVX-512 VNNI (Highway target AVX3_DL): each 256-value super-group of a row is
/// decoded by SIMD shuffles and shifts into 4 × 64 unsigned bytes plus per-lane scales. Decode
/// (up to 8 tokens for the K-quants and IQ4_XS against 256-value activation blocks, 7 for the
/// rest): the codes transposed once per row so that each int32 lane sums one 16-value
/// sub-block (xa.qt holds the activations in that order), per 64 values and token one
/// vpdpbusd, per super-group and token one scaling by the sub-block scales (integer-scaled
/// formats: one vpmulld, then one conversion and FMA by d·dx; the rest: one conversion, one
/// multiply by a_s·dx, one FMA); prefill on 16-row panels of one vpdpbusd per 16 rows × 4
/// values (the integer-scaled formats' panels keep sc_s as int32 lanes: per 16 values and token
/// the 4 vpdpbusd share one vpmulld into an exact int32 sum over the super-group, converted and
/// scaled by d·dx once). AVX2 (and AVX-512 without VNNI): per 32 values and token one vpmaddubsw
/// and one vpmaddwd, one row × up to 8 tokens per tile; prefill decodes a block of 16 rows once
/// for all its token tiles (gemm_ggml_avx2-inl.h). Other targets (and, on AVX2, K-quant rows
/// against 32-value activation blocks) decode with the scalar unpack_super_group and multiply
/// with Highway int16 multiply-adds. Threaded over output rows (split_rows_guided: ranges of
/// 4-row tiles, 32 for prefill, taken from a shared counter); products under
/// `min_parallel_macs` run on the calling thread. Preconditions: is_ggml_gemm_dtype(w.dtype),
/// in == xa.in, w.nbytes == out · row bytes, y.size() == n_tokens · out; not called from
/// inside a pool.parallel_for.
void gemm_ggml(const TensorView& w, const GgmlActivations& xa, std::span<float> y, ThreadPool& pool,
               std::int64_t min_parallel_macs);

/// Scalar twin of gemm_ggml: unpack_super_group per super-group, int32 dot per 16 values, f32
/// sums in order.
void gemm_ggml_reference(const TensorView& w, const GgmlActivations& xa, std::span<float> y);

}  // namespace peregrine

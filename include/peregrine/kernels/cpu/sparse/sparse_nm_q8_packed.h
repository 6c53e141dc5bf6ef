// 2:4 sparse Q4_0 / Q8_0 weights (core/dtype.h q4_0_s24, q8_0_s24; Mishra et al. 2021,
// "Accelerating Sparse Deep Neural Networks") repacked at load for the decode GEMV against Q8_0
// activation blocks: 16 rows in the lanes of a vector, as the dense Q4_0 GEMV (quant_packed.h),
// reading only the kept codes, their 2-bit positions and the block scales — the stored bytes,
// 0.406 (Q4) / 0.656 (Q8) bytes per weight against dense Q4_0's 0.5625 / Q8_0's 1.0625.
//
// Per step of 8 columns (two 2:4 groups, 4 kept values per row) the kernel broadcasts the 8
// activation bytes to every 64-bit lane and picks each row's 4 with one in-lane byte shuffle
// (vpshufb), whose indices come from the rows' 2-bit positions by one vpmultishiftqb and one
// vpternlogd; vpdpbusd then multiplies them with the 4 codes of each of the 16 rows. The
// activations enter as unsigned bytes (q_x + 128) and the codes as signed (Q4_0: q − 8), so
// Σ (q_x + 128)·w − 128·Σ w = Σ q_x·w, exact in int32, the second sum shared by all tokens.
//
// Layout of a group of 16 rows of an [out, in] matrix (in a multiple of 64): units of 64 columns
// (one stored block of 32 kept values per row) in column order, groups in row order; a unit:
//   codes      Q4: [4][64] u8 — chunk c, byte 4e + k: low nibble the code of kept value 4c + k
//                  of row e, high nibble that of kept value 16 + 4c + k (Q4_0's own pairing);
//              Q8: [8][64] i8 — chunk s, byte 4e + k: the code of kept value 4s + k of row e;
//   positions  [8][16] u8 — step s (columns 8s..8s+7; kept values 4s..4s+3, k = 0..3, value k in
//              column group k / 2): two 64-bit words; row e = 2q + h2 (q = e / 2) is in word
//              q mod 2 at bits 16·(q / 2) + 8·h2 + 2k — the column (0..3) of kept value k in its
//              group of 4;
//   scales     [16] f16 — row e's block scale d.
// (416 bytes a unit for Q4, 672 for Q8: the bytes of the 16 stored row blocks and masks.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine {

/// Rows per interleaved group.
inline constexpr std::int64_t kSparseQ8PackRows = 16;

/// Whether this CPU runs a SIMD kernel of the packed GEMV: AVX-512 F/BW, VBMI, VNNI (above), or
/// AVX2 with F16C and FMA — 8 rows per vector, the step's indices by two byte shuffles and masks
/// instead of vpmultishiftqb, vpmaddubsw + vpmaddwd instead of vpdpbusd (Q8_0 with ggml's
/// |w| · x·sign(w), as the pairs would overflow 16 bits); without one the model does not pack.
bool sparse_q8_packed_gemv_available();

/// Whether `w` can be packed: dtype kQ4_0_S24 or kQ8_0_S24, 2-D, rows a whole number of 16-row
/// groups, row length a multiple of 64, nbytes == out · row bytes.
bool sparse_q8_packable(const TensorView& w);

/// Bytes of the packed copy of `w` (sparse_q8_packable): w.nbytes.
std::size_t sparse_q8_packed_bytes(const TensorView& w);

/// Repacks `w` (sparse_q8_packable) into the layout above, in the first
/// sparse_q8_packed_bytes(w) bytes of `dst`. Errors: kInvalidArgument when
/// !sparse_q8_packable(w), dst is too short, or a group's mask does not mark exactly 2 of its 4
/// columns (naming row and group).
Status pack_sparse_q8(const TensorView& w, std::span<std::uint8_t> dst);

/// One product: w packed by pack_sparse_q8 (w->packed set), its activations xq ([n_tokens, in],
/// blocks of 32, kActivationBlockQ8_0), its output y: [n_tokens, out] f32.
struct SparseQ8Product {
  const TensorView* w;
  const QuantizedActivations* xq;
  std::span<float> y;
};

/// y = xq · Wᵀ for every product (decode and prefill alike: the tokens 4 at a time per group, the
/// group staying in L1/L2 between them; tinyllama q4_0_s24 pp128 ran 3.3× the decoded-panel GEMM
/// of sparse_nm_matmul.h in the same run) (of one input, e.g. a layer's Q, K and V, or of several),
/// overwritten: per token and row, y[t, o] = Σ over activation blocks a in order of
/// fma(float(S_a), d_w · d_x[t, a], acc) from acc = 0, S_a = Σ over the kept values in the
/// block's 32 columns of q_w · q_x (int32, exact; q_w = q − 8 for Q4_0) and d_w the scale of the
/// stored block holding those columns — so the scalar twin gives the same bits. Rows split over
/// the pool as one range of whole 16-row groups (guided); on the calling thread below
/// `min_parallel_macs` (dense multiply-adds, as matmul.h counts them). Preconditions:
/// sparse_q8_packed_gemv_available(), every w packed, every xq->in == w->row_length(), all
/// n_tokens equal and >= 1, y sizes n_tokens·out; not called from inside a pool.parallel_for.
void gemv_sparse_q8_packed(std::span<const SparseQ8Product> products, ThreadPool& pool,
                           std::int64_t min_parallel_macs);

/// Scalar twin over the packed layout (any CPU): the formula above in the same order, the same
/// bits as gemv_sparse_q8_packed.
void gemv_sparse_q8_packed_reference(const SparseQ8Product& product);

}  // namespace peregrine

// Q4_0 and Q8_0 weights repacked at load time for the decode GEMV: 16 rows interleaved so that
// one AVX-512 VNNI vpdpbusd multiplies 16 rows × 4 values by 4 activation bytes, with the rows
// in the vector's lanes (llama.cpp's CPU "repack" buffers do this for Q4_0 as block_q4_0x8 /
// ggml_gemv_q4_0_8x8_q8_0). Reading a row-major row per tile spends ~12 vector ops per 64
// values (nibble shuffles or split 34-byte loads, per-block scale conversions, a horizontal sum
// per row); 16 rows in lanes spend ~25 (Q4_0) or ~17 (Q8_0) per 16 × 32 values and store 16
// outputs at once.
//
// Layout of a group of 16 rows (g = row / 16) with B = in / 32 blocks per row: the same bytes
// as the 16 stored rows (B · 16 blocks), groups in row order, block b of the group at
// b · (16 · block bytes), each block of the group being 8 quarters of 64 bytes' worth of
// codes, then the 16 rows' f16 scales:
//   Q4_0 (288 bytes per group block): codes [4][64] u8: for quarter h and row e (0..15), bytes
//     k = 0..3 at h·64 + 4e + k hold value 4h + k of row e's block b in the low nibble and
//     value 4(h + 4) + k in the high nibble (each nibble is Q4_0's q, value = d · (q − 8));
//     scales [16] f16 at 256 + 2e.
//   Q8_0 (544 bytes per group block): codes [8][64] u8: for eighth m and row e, bytes k = 0..3
//     at m·64 + 4e + k hold value 4m + k of row e's block b as q xor 0x80 = q + 128 (Q8_0's
//     signed q made vpdpbusd's unsigned operand; value = d · q); scales [16] f16 at 512 + 2e.
// So the codes give vpdpbusd's unsigned operand u_m for values 4m..4m+3 (m = 0..7) of the 16
// rows (one int32 lane per row): Q4_0's by `and 0x0f` of quarter m (m < 4) or of its shift by
// 4 (m >= 4), Q8_0's as loaded; Σ u·q_x exceeds the true dot by c · Σ q_x (c = 8 for Q4_0,
// 128 for Q8_0), which a per token and block bias takes off. AVX2 reads the same layout as two
// halves of 8 rows (bytes 0-31 and 32-63 of every 64), emulating vpdpbusd with vpmaddubsw and
// vpmaddwd; its Q8_0 kernel multiplies |q| by x with q's sign (u would saturate vpmaddubsw) and
// needs no bias. Each thread reads its groups as
// one sequential stream: with the scales in a separate array after the codes (two streams per
// group) the Q4_0 GEMV read ~25% slower from DRAM than row-major Q4_0.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine {

/// Rows per interleaved group.
inline constexpr std::int64_t kQuantPackRows = 16;

/// Whether this CPU runs the packed GEMV's SIMD kernel (AVX-512 VNNI, or AVX2, which AVX-512
/// without VNNI runs too); without it packing would only cost memory, so the model does not pack.
bool quant_packed_gemv_available();

/// Whether `w` can be packed: dtype kQ4_0 or kQ8_0, 2-D, rows a multiple of kQuantPackRows,
/// row length a multiple of 32, nbytes matching.
bool quant_packable(const TensorView& w);

/// Repacks `w` ([out, in] Q4_0 or Q8_0, quant_packable) into the layout above, in the first
/// w.nbytes bytes of `dst` (the layout holds the same bytes; LlamaModel packs into one
/// HugePageBuffer). Errors: kInvalidArgument when !quant_packable(w) or dst is shorter than
/// w.nbytes.
Status pack_quant(const TensorView& w, std::span<std::uint8_t> dst);

/// One product of the packed GEMV: the packed weights (dtype kQ4_0 or kQ8_0) of a [out, in]
/// matrix W, its activations xq ([n_tokens, in], blocks of 32, kActivationBlockQ8_0) and its
/// output y: [n_tokens, out] f32.
struct PackedProduct {
  DType dtype;
  const std::uint8_t* packed;
  std::int64_t out;
  const QuantizedActivations* xq;
  std::span<float> y;
};

/// y = xq · Wᵀ for every product (of one input, e.g. a layer's Q, K and V, or of several,
/// e.g. the down projections of a token's experts; Q4_0 and Q8_0 may mix): exactly
/// gemm_quant's formula y[t, o] = Σ_b (d_w · d_x) · (Σ_j q_w·q_x in int32), the block sum in f32
/// (here fused multiply-adds, one lane per row); each y overwritten. The products' rows are
/// split over the pool as one range (guided, in whole 16-row groups): one parallel region,
/// every thread one stream through them, instead of one region per matrix with its start and
/// its tail each; on the calling thread below `min_parallel_macs` multiply-adds in all (see
/// matmul.h). AVX-512 VNNI or AVX2 when available, else the scalar twin's loop. Preconditions: every
/// out % kQuantPackRows == 0, xq->in == in, all xq->n_tokens equal and >= 1,
/// y.size() == n_tokens·out; not called from inside a pool.parallel_for.
void gemv_quant_packed(std::span<const PackedProduct> products, ThreadPool& pool, std::int64_t min_parallel_macs);

/// Scalar twin over the packed layout of `product`: per token and row, blocks in order, the
/// int32 dot of the unpacked codes q with q_x, then acc += (d_w · d_x) · dot in f32 — the same
/// arithmetic as gemm_quant_reference on the unpacked matrix, so equal to it bit for bit.
void gemv_quant_packed_reference(const PackedProduct& product);

}  // namespace peregrine

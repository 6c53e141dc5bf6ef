// Encoders of ggml's block formats (layouts: core/dtype.h for Q8_0 / Q4_0, quant/ggml_blocks.h for
// the others), bit-exact with the encoders llama.cpp's llama-quantize runs without an importance
// matrix (ggml-quants.c at llama.cpp c392e50: quantize_row_<type>_ref, and quantize_iq4_nl /
// quantize_iq4_xs with quant_weights NULL): the same f32 operations in the same order, compiled
// without FMA contraction. The scale searches they share are in quant/ggml_scale_search.h.
#pragma once

#include <span>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Encodes x (whole blocks of `t`: x.size() % dtype_block_size(t) == 0) into `dst`, which
/// receives dtype_row_bytes(t, x.size()) bytes. Returns false, writing nothing, when `t` is not
/// one of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
/// Per block (the details and the order of operations follow ggml):
/// - Q8_0: d = absmax / 127, q = roundf(x / d).
/// - Q4_0 / Q5_0: d = m / -8 (-16), m the value of largest magnitude; q = min(15 (31),
///   trunc(x / d + 8.5 (16.5))).
/// - Q4_1 / Q5_1: d = (max − min) / 15 (31), offset min; q = min(15 (31), trunc((x − min) / d + 0.5)).
/// - IQ4_NL: the scale on the kIq4nlValues grid with the largest Σwxq² / Σwq² (w = x²) among
///   d = max / 127 and 15 nearby inverse scales, values re-coded with that scale.
/// - Q2_K / Q4_K / Q5_K: per sub-block a scale and offset from search_scale_and_min (weights
///   |x| for Q2_K; rms(x) + |x| for Q4_K / Q5_K), both quantized to 4 (Q2_K) or 6 bits against
///   the super-block's largest, then the values re-coded with the quantized scales.
/// - Q3_K / Q6_K: per sub-block of 16 a symmetric scale (search_q3_scale / search_symmetric_scale),
///   quantized to 6 / 8 bits against the largest, values re-coded.
/// - IQ4_XS: IQ4_NL's search per 32 values, the 8 scales quantized to 6 bits (super-block scale
///   -max_scale / 32), values re-coded with each quantized scale.
/// An all-zero block encodes with zero scales (the exact bytes ggml writes).
bool quantize_ggml_blocks(DType t, std::span<const float> x, void* dst);

}  // namespace peregrine

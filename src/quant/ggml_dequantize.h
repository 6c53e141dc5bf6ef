// Decoders of ggml's block formats beyond Q8_0 / Q4_0 (layouts: quant/ggml_blocks.h), bit-exact
// with ggml-quants.c's dequantize_row_* (and gguf-py's gguf.quants.dequantize): the same f32
// operations in the same order, compiled without FMA contraction.
#pragma once

#include <span>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Decodes out.size() values (whole blocks of `t`) starting at `src` into out. Returns false,
/// writing nothing, when `t` is not one of Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K,
/// Q6_K, IQ4_XS. Precondition: out.size() % dtype_block_size(t) == 0.
bool dequantize_ggml_blocks(DType t, const void* src, std::span<float> out);

}  // namespace peregrine

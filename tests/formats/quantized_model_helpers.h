// Test-only quantized variants of a loaded F32 model: every linear (the 2-D tensors but the
// embedding) re-encoded into owned buffers, as the quantization pipeline leaves a model.
#pragma once

#include <cstdint>

#include "peregrine/formats/model_file.h"

namespace peregrine::test {

/// The bundled stories260K model (llama2.c .bin, F32), loaded once; an empty ModelFile and a
/// failed expectation if it cannot be read.
const ModelFile& stories260k_model();

/// Group-wise int (quant/int_group.h quantize_int_rtn) with `bits`, symmetry, `group` values
/// per group (-1: per-channel, i.e. the row length of each linear), activation mode
/// `act_bits` / `outlier_threshold`. Precondition: `m`'s linears are F32.
ModelFile int_linears(ModelFile m, int bits, bool asymmetric, std::int64_t group, int act_bits = 16,
                      float outlier_threshold = 0.0f);

/// FP8 rows (quant/quantize_rtn.h) of dtype `t` (kF8E4M3 or kF8E5M2). Precondition: F32 linears.
ModelFile fp8_linears(ModelFile m, DType t);

}  // namespace peregrine::test

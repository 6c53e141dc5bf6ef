// In-memory weight conversion of a loaded model (`--dtype` on load): every 2-D matrix
// re-encoded with round-to-nearest (quant/quantize_rtn.h), or decoded exactly to f32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// The dtype a weight matrix with rows of `row_length` values is stored in when `target` is
/// asked for: `target`, except F16 when `target` is block-quantized (Q8_0/Q4_0) and
/// row_length is not a multiple of its 32-value block (e.g. stories260K's ffn_down, whose rows
/// hold ffn_dim = 172 values). The same rule is used by `peregrine synth`.
DType matrix_dtype_for(DType target, std::int64_t row_length);

/// The dtypes convert_model_weights encodes to (quantize_rtn's weight formats), in the order
/// the CLI lists them: f32, f16, bf16, q8_0, q4_0.
std::span<const DType> convert_target_dtypes();

/// Re-encodes every 2-D tensor of `m` (token_embd, output, attention and FFN projections) as
/// matrix_dtype_for(target, row_length): each row is decoded to f32 (dequantize_row, any
/// stored dtype) and encoded with quantize_rtn. Matrices already in that dtype and the 1-D
/// norm weights are left as they are. The new bytes are owned by m.storage (the views point
/// into them); the mapping stays alive for the tensors not converted. Rows are split over
/// `pool` when one is given.
/// `target` F32 accepts every model, quantized ones included (GGUF Q4_0..Q6_K, IQ4_NL/XS,
/// group-wise int, FP8): decoding is exact, so the F32 matrices equal dequantize_row of the
/// originals bit for bit. Any other target needs an F32/F16/BF16 model.
/// Returns the names of the matrices that fell back to F16 (sorted; empty unless `target` is
/// Q8_0/Q4_0). Errors: kInvalidArgument when `target` is not one of convert_target_dtypes();
/// kUnsupported when `target` is not F32 and `m` holds a tensor that is neither F32, F16 nor
/// BF16 (re-quantizing would compound rounding errors; convert the original instead).
Expected<std::vector<std::string>> convert_model_weights(ModelFile& m, DType target,
                                                         ThreadPool* pool = nullptr);

}  // namespace peregrine

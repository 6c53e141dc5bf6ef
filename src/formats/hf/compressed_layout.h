// Peregrine's compressed layout of int8 / FP8 linears in a Hugging Face folder (quant_method
// "peregrine", format "compressed"): the channel-wise checkpoint shape of SmoothQuant W8A8,
// LLM.int8() and FP8 models (as in compressed-tensors' int-quantized / float-quantized
// channel formats).
//   weight       I8 [out, in]: q − 2^(bits−1) for symmetric per-channel kInt codes q (bits from
//                the config), or F8_E4M3 / F8_E5M2 [out, in]: the FP8 bytes of the runtime's
//                row-scaled F8 rows (core/dtype.h);
//   weight_scale F32 [out] (also read: [out, 1], and a per-tensor [] or [1]).
// x = weight_scale[o] · (q − 2^(bits−1)) or weight_scale[o] · fp8(f). The runtime kInt rows
// hold f16 scales: a file scale that is not an f16 value is rounded to the nearest one (files
// Peregrine writes hold f16 values, so they load exactly).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hf/hf_quant_config.h"
#include "formats/hf/hf_quant_parts.h"

namespace peregrine {

/// Whether the layout can hold `w`: F8 tensors, and symmetric per-channel (group_size >= row
/// length) kInt tensors. Errors: kUnsupported naming the tensor.
Status compressed_can_hold(const TensorView& w);

/// The tensors encode_compressed writes for `w`: weight (I8, or w's FP8 type), weight_scale.
std::vector<HfPart> compressed_parts(const TensorView& w);

/// The bytes of compressed_parts(w), in that order. Precondition: compressed_can_hold(w).
std::vector<std::vector<std::uint8_t>> encode_compressed(const TensorView& w);

/// The tensor `name` [out, in] from the `parts` of the HF linear `module`: kInt (bits,
/// act_bits and outlier_threshold of `q`, symmetric, one group per row) for an I8 weight,
/// kF8E4M3 / kF8E5M2 for an FP8 one. Errors: kCorruptFile (a part missing, unexpected, of
/// another dtype or shape; an I8 value outside the bits' range; a non-finite scale or one
/// beyond f16's range for int rows); kUnsupported (weight_scale not F32).
Expected<OwnedTensor> decode_compressed(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                        const std::string& name, std::int64_t out, std::int64_t in);

}  // namespace peregrine

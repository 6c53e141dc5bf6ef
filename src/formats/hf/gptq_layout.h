// GPTQ's layout of an int linear in a Hugging Face folder (AutoGPTQ / transformers,
// quant_method "gptq"). Spec: AutoGPTQ QuantLinear (qlinear_cuda_old.py pack / forward).
//
// A linear [out, in] with `bits`-bit codes q[o, i] in G = ceil(in / group_size) groups of input
// columns (the last one may be partial; group_size -1: one group) is stored as
//   qweight I32 [ceil(in·bits/32), out]: column o is q[o, 0..in) as an LSB-first bit stream of
//           32-bit words (packed_words.h; 3-bit codes straddle words, 32 codes in 3 words);
//   qzeros  I32 [G, ceil(out·bits/32)]: row g is the zero points z[0..out, g] packed the same way,
//           stored as z − 1 in checkpoint_format "gptq" (v1, AutoGPTQ's convention) or as z in
//           "gptq_v2" (GPTQModel);
//   scales  F16 [G, out];
//   g_idx   I32 [in]: the group of input column i, i / group_size.
// x = scales[g, o] · (q − z). When in·bits (or out·bits) is not a multiple of 32 the last word is
// padded with zero bits: AutoGPTQ's own modules need in % 32 == 0 (and out·bits % 32 == 0), so
// such files (e.g. stories260K's ffn_down, in = 172) are readable by Peregrine only.
// Act-order files whose g_idx is not i / group_size (groups that are not runs of consecutive
// columns) do not fit the runtime format's consecutive groups and are rejected (kUnsupported:
// re-quantize without desc_act, or with static_groups).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hf/hf_quant_config.h"
#include "formats/hf/hf_quant_parts.h"

namespace peregrine {

/// The tensors encode_gptq writes for a linear [out, in] under `q`: qweight, qzeros, scales,
/// g_idx (shapes above).
std::vector<HfPart> gptq_parts(std::int64_t out, std::int64_t in, const HfQuantConfig& q);

/// The bytes of gptq_parts(out, in, q), in that order, for the kInt tensor `w` [out, in].
/// Precondition: w's groups are those of q.params(in) (same bits, group boundaries and
/// symmetry); with q.gptq_v2 false no zero point is 0 (v1 cannot store it).
std::vector<std::vector<std::uint8_t>> encode_gptq(const TensorView& w, const HfQuantConfig& q);

/// The kInt tensor `name` [out, in] with parameters q.params(in) from the `parts` of the HF
/// linear `module`. Errors: kCorruptFile (a part missing, unexpected, of another dtype or
/// shape; a non-finite scale; a zero point outside the code range or, in a symmetric file, not
/// 2^(bits-1); a g_idx entry outside [0, G)); kUnsupported (an act-order g_idx; a v1 zero
/// point of 2^bits).
Expected<OwnedTensor> decode_gptq(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                  const std::string& name, std::int64_t out, std::int64_t in);

}  // namespace peregrine

// AutoAWQ's GEMM layout of a 4-bit int linear in a Hugging Face folder (quant_method "awq",
// version "gemm"). Spec: AutoAWQ WQLinear_GEMM.from_linear (awq/modules/linear/gemm.py).
//
// A linear [out, in] with 4-bit codes q[o, i] in G = ceil(in / group_size) groups of input
// columns (the last one may be partial; group_size -1: one group) is stored as
//   qweight I32 [in, ceil(out/8)]: word (i, c) holds q[8c + order[k], i] in bits [4k, 4k + 4),
//           order = [0, 2, 4, 6, 1, 3, 5, 7] (the interleaving AWQ's dequantization kernel wants);
//   qzeros  I32 [G, ceil(out/8)]: the zero points z[·, g] packed the same way (stored as is);
//   scales  F16 [G, out].
// x = scales[g, o] · (q − z). zero_point false (symmetric) files store z = 8 everywhere. When out
// is not a multiple of 8 the last word's unused nibbles are zero, and a partial last group is
// stored as a group of its own: AutoAWQ itself asserts out % 8 == 0 and in % group_size == 0,
// so such files (e.g. stories260K, whose ffn dim is 172) are readable by Peregrine only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/hf/hf_quant_config.h"
#include "formats/hf/hf_quant_parts.h"

namespace peregrine {

/// The tensors encode_awq writes for a linear [out, in] under `q` (bits 4): qweight, qzeros,
/// scales (shapes above).
std::vector<HfPart> awq_parts(std::int64_t out, std::int64_t in, const HfQuantConfig& q);

/// The bytes of awq_parts(out, in, q), in that order, for the 4-bit kInt tensor `w` [out, in].
/// Precondition: w's groups are those of q.params(in).
std::vector<std::vector<std::uint8_t>> encode_awq(const TensorView& w, const HfQuantConfig& q);

/// The kInt tensor `name` [out, in] with parameters q.params(in) from the `parts` of the HF
/// linear `module`. Errors: kCorruptFile (a part missing, unexpected, of another dtype or
/// shape; a non-finite scale; a symmetric file's zero point other than 8).
Expected<OwnedTensor> decode_awq(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                 const std::string& name, std::int64_t out, std::int64_t in);

}  // namespace peregrine

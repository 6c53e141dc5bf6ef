// The safetensors tensors of one linear of a Hugging Face folder in a quantized layout (GPTQ,
// AWQ, compressed) and what the layouts share: part lookup with shape checks, kInt rows
// (quant/int_group.h) unpacked and packed, and the group-wise layouts' common f16 `scales`
// [groups, out] with zero-point checks.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "formats/owned_tensor.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/quant/int_group.h"

namespace peregrine {

/// A tensor a layout writes for one linear, named "<module>.<suffix>" (module: the HF name
/// without ".weight", e.g. "model.layers.0.mlp.down_proj").
struct HfPart {
  std::string suffix;  // "qweight", "qzeros", "scales", "g_idx", "weight", "weight_scale"
  SafetensorsDtype dtype = SafetensorsDtype::kI32;
  std::vector<std::int64_t> shape;
};

/// The tensors of one linear as read from a file: suffix → tensor.
using HfParts = std::map<std::string, const SafetensorsTensor*>;

/// Part `suffix` of `parts`, checked to be `dtype` with `shape`; `module` and `context` (the
/// dimensions it follows from) go into the messages.
/// Errors: kCorruptFile ("<module>.<suffix> is missing", "… is I8, expected I32", "… has shape
/// [2, 64], expected [8, 64] (<context>)").
Expected<const SafetensorsTensor*> expect_part(const HfParts& parts, const std::string& module, const std::string& suffix,
                                               SafetensorsDtype dtype, const std::vector<std::int64_t>& shape,
                                               const std::string& context);

/// Checks that `parts` holds no suffix outside `allowed`. Errors: kCorruptFile naming the
/// first unexpected tensor "<module>.<suffix>" and `layout`.
Status expect_only(const HfParts& parts, const std::string& module, std::initializer_list<const char*> allowed,
                   const std::string& layout);

/// Every row of the kInt tensor `w` [out, in], unpacked.
std::vector<IntRow> unpack_int_rows(const TensorView& w);

/// The kInt tensor `name` [rows.size(), in] with parameters `p`, packed from `rows`.
OwnedTensor pack_int_rows(const std::string& name, std::int64_t in, const QuantParams& p, const std::vector<IntRow>& rows);

/// `scales` [groups, out] as f16 bytes (row-major) from each row's group scales.
std::vector<std::uint8_t> encode_group_scales(const std::vector<IntRow>& rows, std::int64_t groups);

/// One group's checked parameters (the non-template part of read_group_params below).
Expected<GroupScale> checked_group(std::uint16_t scale_f16, int zero, const QuantParams& p, const std::string& module,
                                   std::int64_t g, std::int64_t o);

/// The group scales and zero points of kInt rows [out] with parameters `p` from a group-wise
/// layout: scale(g, o) from `scales` (F16 [groups, out]), zero(g, o) given by the layout.
/// Fills rows[o].groups. Errors: kCorruptFile naming `module` (a non-finite scale, a zero point
/// outside [0, 2^bits - 1], or not 2^(bits-1) in a symmetric file); kUnsupported (GPTQ v1's
/// zero point 2^bits, i.e. a stored -1, which the runtime format cannot hold).
template <typename ZeroFn>
Status read_group_params(const SafetensorsTensor& scales, const QuantParams& p, ZeroFn zero, const std::string& module,
                         std::vector<IntRow>& rows) {
  const auto out = static_cast<std::int64_t>(rows.size());
  const std::int64_t groups = scales.shape[0];
  for (std::int64_t o = 0; o < out; ++o) {
    rows[static_cast<std::size_t>(o)].groups.resize(static_cast<std::size_t>(groups));
    for (std::int64_t g = 0; g < groups; ++g) {
      std::uint16_t s;
      std::memcpy(&s, scales.data + 2 * (g * out + o), sizeof s);
      PEREGRINE_ASSIGN_OR_RETURN(rows[static_cast<std::size_t>(o)].groups[static_cast<std::size_t>(g)],
                                 checked_group(s, zero(g, o), p, module, g, o));
    }
  }
  return Status::ok();
}

}  // namespace peregrine

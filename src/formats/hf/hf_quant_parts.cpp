#include "formats/hf/hf_quant_parts.h"

#include <cmath>

#include "peregrine/quant/fp16.h"

namespace peregrine {

Expected<const SafetensorsTensor*> expect_part(const HfParts& parts, const std::string& module, const std::string& suffix,
                                               SafetensorsDtype dtype, const std::vector<std::int64_t>& shape,
                                               const std::string& context) {
  const std::string name = module + "." + suffix;
  const auto it = parts.find(suffix);
  if (it == parts.end()) return corrupt_file(name + " is missing (" + context + ")");
  const SafetensorsTensor& t = *it->second;
  if (t.dtype != dtype) {
    return corrupt_file(name + " is " + std::string(safetensors_dtype_name(t.dtype)) + ", expected " +
                        std::string(safetensors_dtype_name(dtype)));
  }
  if (t.shape != shape) {
    SafetensorsTensor want;
    want.shape = shape;
    return corrupt_file(name + " has shape " + t.shape_string() + ", expected " + want.shape_string() + " (" + context + ")");
  }
  return &t;
}

Status expect_only(const HfParts& parts, const std::string& module, std::initializer_list<const char*> allowed,
                   const std::string& layout) {
  for (const auto& [suffix, t] : parts) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || suffix == a;
    if (!ok) return corrupt_file(module + "." + suffix + " does not belong to the " + layout + " layout");
  }
  return Status::ok();
}

std::vector<IntRow> unpack_int_rows(const TensorView& w) {
  std::vector<IntRow> rows(static_cast<std::size_t>(w.n_rows()));
  const std::size_t rb = *w.row_bytes();
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = unpack_int_row(w.quant, src + r * rb, w.row_length());
  return rows;
}

OwnedTensor pack_int_rows(const std::string& name, std::int64_t in, const QuantParams& p, const std::vector<IntRow>& rows) {
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(in));
  std::vector<std::uint8_t> bytes(rb * rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) pack_int_row(p, rows[r], bytes.data() + r * rb);
  TensorView meta;
  meta.name = name;
  meta.dtype = DType::kInt;
  meta.shape = {static_cast<std::int64_t>(rows.size()), in};
  meta.quant = p;
  return own_tensor(std::move(meta), std::move(bytes));
}

std::vector<std::uint8_t> encode_group_scales(const std::vector<IntRow>& rows, std::int64_t groups) {
  const std::size_t out = rows.size();
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(groups) * out * 2);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t g = 0; g < static_cast<std::size_t>(groups); ++g) {
      const std::uint16_t s = f32_to_f16(rows[o].groups[g].scale);
      std::memcpy(bytes.data() + 2 * (g * out + o), &s, sizeof s);
    }
  }
  return bytes;
}

Expected<GroupScale> checked_group(std::uint16_t scale_f16, int zero, const QuantParams& p, const std::string& module,
                                   std::int64_t g, std::int64_t o) {
  const std::string where = module + ": group " + std::to_string(g) + " of output " + std::to_string(o);
  const float scale = f16_to_f32(scale_f16);
  if (!std::isfinite(scale)) return corrupt_file(where + " has a non-finite scale");
  const int max_code = (1 << p.bits) - 1;
  if (zero == max_code + 1) {
    return unsupported(where + " has zero point " + std::to_string(zero) +
                       " (a GPTQ v1 file's stored -1); the runtime int format holds 0 .. " + std::to_string(max_code));
  }
  if (zero < 0 || zero > max_code) {
    return corrupt_file(where + " has zero point " + std::to_string(zero) + " outside 0 .. " + std::to_string(max_code));
  }
  const int sym_zero = 1 << (p.bits - 1);
  if (!p.asymmetric && zero != sym_zero) {
    return corrupt_file(where + " has zero point " + std::to_string(zero) + " but the file is symmetric (zero " +
                        std::to_string(sym_zero) + ")");
  }
  return GroupScale{scale, zero};
}

}  // namespace peregrine

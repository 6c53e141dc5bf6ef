#include "formats/hf/compressed_layout.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

std::vector<std::uint8_t> f32_bytes(float v) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

float load_f32(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::optional<SafetensorsDtype> fp8_type_of(DType t) {
  if (t == DType::kF8E4M3) return SafetensorsDtype::kF8E4M3;
  if (t == DType::kF8E5M2) return SafetensorsDtype::kF8E5M2;
  return std::nullopt;
}

/// The scale of every output row, from weight_scale [out], [out, 1], [1] or [].
Expected<std::vector<float>> read_scales(const HfParts& parts, const std::string& module, std::int64_t out) {
  const std::string name = module + ".weight_scale";
  const auto it = parts.find("weight_scale");
  if (it == parts.end()) return corrupt_file(name + " is missing (the scales of " + module + ".weight)");
  const SafetensorsTensor& t = *it->second;
  if (t.dtype != SafetensorsDtype::kF32) {
    return unsupported(name + " is " + std::string(safetensors_dtype_name(t.dtype)) + ", expected F32");
  }
  const std::int64_t n = t.numel();
  const bool per_channel = t.shape == std::vector<std::int64_t>{out} || t.shape == std::vector<std::int64_t>{out, 1};
  if (!per_channel && n != 1) {
    return corrupt_file(name + " has shape " + t.shape_string() + ", expected [" + std::to_string(out) + "] (or one scale)");
  }
  std::vector<float> scales(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    scales[static_cast<std::size_t>(o)] = load_f32(t.data + 4 * (n == 1 ? 0 : o));
    if (!std::isfinite(scales[static_cast<std::size_t>(o)])) return corrupt_file(name + "[" + std::to_string(o) + "] is not finite");
  }
  return scales;
}

Expected<OwnedTensor> decode_int8(const SafetensorsTensor& weight, const std::vector<float>& scales, QuantParams p,
                                  const std::string& module, const std::string& name) {
  const std::int64_t out = weight.shape[0], in = weight.shape[1];
  p.group_size = in;
  p.asymmetric = false;
  const int half = 1 << (p.bits - 1);
  std::vector<IntRow> rows(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    const float s = scales[static_cast<std::size_t>(o)];
    if (!std::isfinite(f16_to_f32(f32_to_f16(s)))) {
      return corrupt_file(module + ".weight_scale[" + std::to_string(o) + "] = " + std::to_string(s) + " is beyond f16's range");
    }
    IntRow& row = rows[static_cast<std::size_t>(o)];
    row.groups = {GroupScale{f16_to_f32(f32_to_f16(s)), half}};
    row.codes.resize(static_cast<std::size_t>(in));
    for (std::int64_t i = 0; i < in; ++i) {
      const int v = static_cast<std::int8_t>(weight.data[o * in + i]);
      if (v < -half || v >= half) {
        return corrupt_file(module + ".weight[" + std::to_string(o) + ", " + std::to_string(i) + "] = " + std::to_string(v) +
                            " is outside the " + std::to_string(p.bits) + "-bit range");
      }
      row.codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v + half);
    }
  }
  return pack_int_rows(name, in, p, rows);
}

OwnedTensor decode_fp8(const SafetensorsTensor& weight, const std::vector<float>& scales, DType dtype, const std::string& name) {
  const std::int64_t out = weight.shape[0], in = weight.shape[1];
  const auto rb = static_cast<std::size_t>(in) + kRowScaleBytes;
  std::vector<std::uint8_t> bytes(rb * static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    std::memcpy(bytes.data() + o * rb, &scales[static_cast<std::size_t>(o)], kRowScaleBytes);
    std::memcpy(bytes.data() + o * rb + kRowScaleBytes, weight.data + o * in, static_cast<std::size_t>(in));
  }
  TensorView meta;
  meta.name = name;
  meta.dtype = dtype;
  meta.shape = {out, in};
  return own_tensor(std::move(meta), std::move(bytes));
}

}  // namespace

Status compressed_can_hold(const TensorView& w) {
  if (fp8_type_of(w.dtype)) return Status::ok();
  if (w.dtype == DType::kInt && !w.quant.asymmetric && w.quant.group_size >= w.row_length()) return Status::ok();
  return unsupported("tensor '" + w.name + "' (" + std::string(dtype_name(w.dtype)) +
                     (w.dtype == DType::kInt ? (w.quant.asymmetric ? ", asymmetric" : ", group-wise") : std::string()) +
                     ") does not fit the compressed layout (FP8, or symmetric per-channel int weights)");
}

std::vector<HfPart> compressed_parts(const TensorView& w) {
  return {{"weight", fp8_type_of(w.dtype).value_or(SafetensorsDtype::kI8), w.shape},
          {"weight_scale", SafetensorsDtype::kF32, {w.shape[0]}}};
}

std::vector<std::vector<std::uint8_t>> encode_compressed(const TensorView& w) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<std::uint8_t> weight(static_cast<std::size_t>(out * in)), scales;
  scales.reserve(static_cast<std::size_t>(out) * 4);
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  const std::size_t rb = *w.row_bytes();
  for (std::int64_t o = 0; o < out; ++o) {
    float s = 0.0f;
    if (w.dtype == DType::kInt) {
      const IntRow row = unpack_int_row(w.quant, src + o * rb, in);
      s = row.groups[0].scale;
      for (std::int64_t i = 0; i < in; ++i) {
        weight[static_cast<std::size_t>(o * in + i)] =
            static_cast<std::uint8_t>(static_cast<std::int8_t>(row.codes[static_cast<std::size_t>(i)] - row.groups[0].zero));
      }
    } else {
      s = load_f32(src + o * rb);
      std::memcpy(weight.data() + o * in, src + o * rb + kRowScaleBytes, static_cast<std::size_t>(in));
    }
    const auto b = f32_bytes(s);
    scales.insert(scales.end(), b.begin(), b.end());
  }
  return {std::move(weight), std::move(scales)};
}

Expected<OwnedTensor> decode_compressed(const HfParts& parts, const std::string& module, const HfQuantConfig& q,
                                        const std::string& name, std::int64_t out, std::int64_t in) {
  PEREGRINE_RETURN_IF_ERROR(expect_only(parts, module, {"weight", "weight_scale"}, "compressed"));
  const auto it = parts.find("weight");
  if (it == parts.end()) return corrupt_file(module + ".weight is missing (beside " + module + ".weight_scale)");
  const SafetensorsDtype type = it->second->dtype;
  const std::string context = "out_features " + std::to_string(out) + ", in_features " + std::to_string(in);
  PEREGRINE_ASSIGN_OR_RETURN(const SafetensorsTensor* weight, expect_part(parts, module, "weight", type, {out, in}, context));
  PEREGRINE_ASSIGN_OR_RETURN(std::vector<float> scales, read_scales(parts, module, out));
  switch (type) {
    case SafetensorsDtype::kI8: return decode_int8(*weight, scales, q.params(in), module, name);
    case SafetensorsDtype::kF8E4M3: return decode_fp8(*weight, scales, DType::kF8E4M3, name);
    case SafetensorsDtype::kF8E5M2: return decode_fp8(*weight, scales, DType::kF8E5M2, name);
    default: break;
  }
  return corrupt_file(module + ".weight is " + std::string(safetensors_dtype_name(type)) +
                      ", expected I8, F8_E4M3 or F8_E5M2 in the compressed layout");
}

}  // namespace peregrine

#include "formats/hf/hf_tensor_decoder.h"

#include "formats/hf/awq_layout.h"
#include "formats/hf/compressed_layout.h"
#include "formats/hf/gptq_layout.h"

namespace peregrine {
namespace {

Expected<OwnedTensor> decode_grouped(const std::string& module, const HfParts& parts, const HfQuantConfig& q,
                                     const std::string& name, std::int64_t out, std::int64_t in) {
  if (q.method == HfQuantMethod::kGptq) return decode_gptq(parts, module, q, name, out, in);
  if (q.method == HfQuantMethod::kAwq) return decode_awq(parts, module, q, name, out, in);
  return unsupported(module + ".qweight: config.json has no GPTQ or AWQ quantization_config describing it");
}

}  // namespace

Expected<OwnedTensor> decode_hf_tensor(const std::string& module, const HfParts& parts, const HfQuantConfig& q,
                                       const std::string& name, const std::vector<std::int64_t>& shape) {
  const auto weight = parts.find("weight");
  const bool raw_weight = weight != parts.end() && !weight->second->weight_view();
  const bool quantized = parts.count("qweight") != 0 || parts.count("weight_scale") != 0 || raw_weight;
  if (quantized && shape.size() != 2) return corrupt_file(module + " is quantized but is not a linear weight");
  if (parts.count("qweight")) return decode_grouped(module, parts, q, name, shape[0], shape[1]);
  if (weight == parts.end()) {
    return corrupt_file(module + "." + parts.begin()->first + " has no " + module + ".weight or " + module + ".qweight");
  }
  if (auto view = weight->second->weight_view()) {
    PEREGRINE_RETURN_IF_ERROR(expect_only(parts, module, {"weight"}, "unquantized"));
    view->name = name;
    return OwnedTensor{std::move(*view), nullptr};
  }
  if (q.method != HfQuantMethod::kCompressed) {
    return unsupported(module + ".weight is " + std::string(safetensors_dtype_name(weight->second->dtype)) +
                       ": raw int / FP8 weights need config.json's peregrine (compressed) quantization_config");
  }
  return decode_compressed(parts, module, q, name, shape[0], shape[1]);
}

}  // namespace peregrine

// The "quantization_config" of a Hugging Face model folder: which layout its quantized linears
// use, with their parameters.
//
// Spec: transformers' GPTQConfig (quant_method "gptq": bits, group_size, sym, desc_act,
// checkpoint_format) and AwqConfig (quant_method "awq": bits, group_size, zero_point, version),
// AutoGPTQ's quantize_config.json; quant_method "peregrine" (format "compressed": bits,
// act_bits, outlier_threshold) is Peregrine's own, for int8 W8A8 / W4A8 and FP8 weights.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"

namespace peregrine {

enum class HfQuantMethod : std::uint8_t {
  kNone,        // no quantization_config: every tensor F32 / F16 / BF16
  kGptq,        // qweight / qzeros / scales / g_idx (formats/hf/gptq_layout.h)
  kAwq,         // qweight / qzeros / scales, AutoAWQ GEMM packing (formats/hf/awq_layout.h)
  kCompressed,  // weight I8 / F8_E4M3 / F8_E5M2 + weight_scale (formats/hf/compressed_layout.h)
};

struct HfQuantConfig {
  HfQuantMethod method = HfQuantMethod::kNone;
  int bits = 8;                    // weight bits of the int linears: 2, 3, 4 or 8
  std::int64_t group_size = -1;    // input features per group; -1: per-channel (one per row)
  bool sym = true;                 // symmetric: every zero point is 2^(bits-1)
  bool gptq_v2 = false;            // GPTQ checkpoint_format "gptq_v2" (qzeros hold the zero
                                   // point) instead of "gptq" (v1, AutoGPTQ: zero point - 1)
  int act_bits = 16;               // kCompressed: 8 = per-token int8 activations at run time
  float outlier_threshold = 0.0f;  // kCompressed, act_bits 8: LLM.int8() threshold (0 = off)

  /// QuantParams of an int linear whose rows hold `in` values (group_size -1 → `in`).
  QuantParams params(std::int64_t in) const;
};

/// The quantization config of the folder `dir` whose config.json is `config`: its
/// "quantization_config" object, else AutoGPTQ's quantize_config.json beside it (quant_method
/// gptq unless it says otherwise), else kNone. Defaults: GPTQ sym true, checkpoint_format
/// "gptq"; AWQ zero_point true, version "gemm"; peregrine act_bits 16, outlier_threshold 0.
/// desc_act is not needed: g_idx says which group each input column belongs to.
/// Errors: kCorruptFile (not an object, a field missing or ill-typed, group_size 0 or < -1);
/// kUnsupported (another quant_method, bits outside {2,3,4,8} (AWQ: 4 only), an AWQ version
/// other than GEMM, a checkpoint_format other than gptq / gptq_v2, act_bits or
/// outlier_threshold outside QuantParams::valid()).
Expected<HfQuantConfig> read_hf_quant_config(const nlohmann::json& config, const std::string& dir);

/// The "quantization_config" object of `q` (method != kNone) with the fields
/// read_hf_quant_config reads (GPTQ also desc_act false; AWQ version "gemm").
nlohmann::ordered_json hf_quant_config_json(const HfQuantConfig& q);

}  // namespace peregrine

#include "formats/hf/hf_quant_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "formats/hf/config_fields.h"

namespace peregrine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Expected<HfQuantMethod> read_method(const ConfigFields& f, const char* fallback) {
  PEREGRINE_ASSIGN_OR_RETURN(auto m, f.optional_string("quant_method"));
  if (!m && *fallback == '\0') return corrupt_file(f.what() + ": field 'quant_method' is missing");
  const std::string method = lower(m.value_or(fallback));
  if (method == "gptq") return HfQuantMethod::kGptq;
  if (method == "awq") return HfQuantMethod::kAwq;
  if (method == "peregrine") return HfQuantMethod::kCompressed;
  return unsupported(f.what() + ": quant_method '" + json_util::printable(method) +
                     "' is not supported (gptq, awq, peregrine)");
}

Status read_bits_and_groups(const ConfigFields& f, HfQuantConfig& q) {
  PEREGRINE_ASSIGN_OR_RETURN(std::int64_t bits, f.required_int("bits"));
  const bool awq = q.method == HfQuantMethod::kAwq;
  if (awq ? bits != 4 : (bits != 2 && bits != 3 && bits != 4 && bits != 8)) {
    return unsupported(f.what() + ": bits " + std::to_string(bits) + " is not supported (" +
                       (awq ? "AWQ GEMM packs 4-bit weights only" : "2, 3, 4 or 8") + ")");
  }
  q.bits = static_cast<int>(bits);
  PEREGRINE_ASSIGN_OR_RETURN(auto group, f.optional_int("group_size"));
  q.group_size = group.value_or(-1);
  if (q.group_size == 0 || q.group_size < -1) {
    return corrupt_file(f.what() + ": group_size " + std::to_string(q.group_size) + " must be positive or -1 (per-channel)");
  }
  return Status::ok();
}

Status read_gptq(const ConfigFields& f, HfQuantConfig& q) {
  PEREGRINE_ASSIGN_OR_RETURN(auto sym, f.optional_bool("sym"));
  q.sym = sym.value_or(true);
  PEREGRINE_ASSIGN_OR_RETURN(auto format, f.optional_string("checkpoint_format"));
  const std::string fmt = lower(format.value_or("gptq"));
  if (fmt != "gptq" && fmt != "gptq_v2") {
    return unsupported(f.what() + ": checkpoint_format '" + json_util::printable(fmt) +
                       "' is not supported (gptq, gptq_v2)");
  }
  q.gptq_v2 = fmt == "gptq_v2";
  return Status::ok();
}

Status read_awq(const ConfigFields& f, HfQuantConfig& q) {
  PEREGRINE_ASSIGN_OR_RETURN(auto zero_point, f.optional_bool("zero_point"));
  q.sym = !zero_point.value_or(true);
  PEREGRINE_ASSIGN_OR_RETURN(auto version, f.optional_string("version"));
  if (lower(version.value_or("gemm")) != "gemm") {
    return unsupported(f.what() + ": AWQ version '" + json_util::printable(*version) +
                       "' is not supported (only GEMM packing)");
  }
  return Status::ok();
}

// The activation mode (a Peregrine key, in every layout): act_bits 16 (default) or 8 with an
// optional LLM.int8() outlier threshold.
Status read_activation_mode(const ConfigFields& f, HfQuantConfig& q) {
  PEREGRINE_ASSIGN_OR_RETURN(auto act_bits, f.optional_int("act_bits"));
  PEREGRINE_ASSIGN_OR_RETURN(auto threshold, f.optional_float("outlier_threshold"));
  q.act_bits = static_cast<int>(std::clamp<std::int64_t>(act_bits.value_or(16), 0, 64));
  q.outlier_threshold = threshold.value_or(0.0f);
  if (!q.params(1).valid()) {
    return unsupported(f.what() + ": act_bits " + std::to_string(act_bits.value_or(16)) + " with outlier_threshold " +
                       std::to_string(q.outlier_threshold) + " is not supported (act_bits 8 or 16; a threshold >= 0, only with 8)");
  }
  return Status::ok();
}

Status read_compressed(const ConfigFields& f) {
  PEREGRINE_ASSIGN_OR_RETURN(auto format, f.optional_string("format"));
  if (format && *format != "compressed") {
    return unsupported(f.what() + ": peregrine format '" + json_util::printable(*format) + "' is not supported (compressed)");
  }
  return Status::ok();
}

Expected<HfQuantConfig> read_object(const json& j, const std::string& what, const char* default_method) {
  if (!j.is_object()) return corrupt_file(what + " is a " + json_util::type_name(j) + ", expected an object");
  const ConfigFields f(j, what);
  HfQuantConfig q;
  PEREGRINE_ASSIGN_OR_RETURN(q.method, read_method(f, default_method));
  PEREGRINE_RETURN_IF_ERROR(read_bits_and_groups(f, q));
  switch (q.method) {
    case HfQuantMethod::kGptq: PEREGRINE_RETURN_IF_ERROR(read_gptq(f, q)); break;
    case HfQuantMethod::kAwq: PEREGRINE_RETURN_IF_ERROR(read_awq(f, q)); break;
    case HfQuantMethod::kCompressed: PEREGRINE_RETURN_IF_ERROR(read_compressed(f)); break;
    case HfQuantMethod::kNone: break;
  }
  if (q.method != HfQuantMethod::kNone) PEREGRINE_RETURN_IF_ERROR(read_activation_mode(f, q));
  return q;
}

nlohmann::ordered_json layout_config_json(const HfQuantConfig& q) {
  switch (q.method) {
    case HfQuantMethod::kGptq:
      return {{"quant_method", "gptq"}, {"bits", q.bits}, {"group_size", q.group_size}, {"sym", q.sym},
              {"desc_act", false}, {"checkpoint_format", q.gptq_v2 ? "gptq_v2" : "gptq"}};
    case HfQuantMethod::kAwq:
      return {{"quant_method", "awq"}, {"bits", q.bits}, {"group_size", q.group_size},
              {"zero_point", !q.sym}, {"version", "gemm"}};
    case HfQuantMethod::kCompressed:
      return {{"quant_method", "peregrine"}, {"format", "compressed"}, {"bits", q.bits},
              {"act_bits", q.act_bits}, {"outlier_threshold", q.outlier_threshold}};
    case HfQuantMethod::kNone: break;
  }
  return nlohmann::ordered_json::object();
}

}  // namespace

QuantParams HfQuantConfig::params(std::int64_t in) const {
  QuantParams p;
  p.bits = bits;
  p.group_size = group_size == -1 ? in : group_size;
  p.asymmetric = !sym;
  p.act_bits = act_bits;
  p.outlier_threshold = outlier_threshold;
  return p;
}

Expected<HfQuantConfig> read_hf_quant_config(const json& config, const std::string& dir) {
  const auto it = config.find("quantization_config");
  if (it != config.end() && !it->is_null()) {
    return read_object(*it, (fs::path(dir) / "config.json").string() + ": quantization_config", "");
  }
  std::error_code ec;
  const fs::path autogptq = fs::path(dir) / "quantize_config.json";
  if (!fs::exists(autogptq, ec)) return HfQuantConfig{};
  PEREGRINE_ASSIGN_OR_RETURN(json j, read_json_file(autogptq.string()));
  return read_object(j, autogptq.string(), "gptq");
}

nlohmann::ordered_json hf_quant_config_json(const HfQuantConfig& q) {
  nlohmann::ordered_json j = layout_config_json(q);
  if (q.method != HfQuantMethod::kCompressed && q.act_bits != 16) {
    j["act_bits"] = q.act_bits;  // W4A8 and friends: activations quantized per token at run time
    j["outlier_threshold"] = q.outlier_threshold;
  }
  return j;
}

}  // namespace peregrine

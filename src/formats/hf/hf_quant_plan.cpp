#include "formats/hf/hf_quant_plan.h"

#include <algorithm>
#include <vector>

#include "formats/hf/compressed_layout.h"
#include "formats/hf/hf_quant_parts.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine {
namespace {

std::string describe(const TensorView& t) {
  const QuantParams& p = t.quant;
  return "'" + t.name + "' (" + std::to_string(p.bits) + "-bit, " + (p.asymmetric ? "asymmetric" : "symmetric") +
         ", group " + std::to_string(p.group_size) + " of rows of " + std::to_string(t.row_length()) + ", act_bits " +
         std::to_string(p.act_bits) + ")";
}

/// Sorts the tensors into int / FP8 linears; the rest must be safetensors' float types.
Status collect(const ModelFile& m, std::vector<const TensorView*>& ints, std::vector<const TensorView*>& fp8s) {
  for (const auto& [name, t] : m.tensors) {
    const auto rb = t.row_bytes();
    if (!rb || *rb * static_cast<std::size_t>(t.n_rows()) != t.nbytes) {
      return invalid_argument("tensor '" + name + "' " + t.shape_string() + " of " + std::string(dtype_name(t.dtype)) +
                              " does not match its " + std::to_string(t.nbytes) + " bytes");
    }
    const bool fp8 = t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2;
    if ((fp8 || t.dtype == DType::kInt) && t.shape.size() != 2) {
      return unsupported("tensor '" + name + "' " + t.shape_string() + " is " + std::string(dtype_name(t.dtype)) +
                         "; only 2-D linear weights can be quantized in a Hugging Face folder");
    }
    if (t.dtype == DType::kInt) {
      ints.push_back(&t);
    } else if (fp8) {
      fp8s.push_back(&t);
    } else if (!safetensors_dtype_of(t.dtype)) {
      return unsupported("tensor '" + name + "' is " + std::string(dtype_name(t.dtype)) +
                         ", which a Hugging Face folder cannot hold (save GGUF block formats as GGUF)");
    }
  }
  return Status::ok();
}

/// Every int linear shares the first one's bits, symmetry and activation mode.
Status check_common(const std::vector<const TensorView*>& ints) {
  for (const TensorView* t : ints) {
    const QuantParams &a = ints.front()->quant, &b = t->quant;
    if (a.bits != b.bits || a.asymmetric != b.asymmetric || a.act_bits != b.act_bits ||
        a.outlier_threshold != b.outlier_threshold) {
      return unsupported("int linears " + describe(*ints.front()) + " and " + describe(*t) +
                         " differ; a Hugging Face quantization_config holds one setting for all");
    }
  }
  return Status::ok();
}

/// -1 when every int linear is per-channel, else their one group size.
Expected<std::int64_t> common_group_size(const std::vector<const TensorView*>& ints) {
  std::int64_t group = -1;
  for (const TensorView* t : ints) {
    if (t->quant.group_size >= t->row_length()) continue;
    if (group != -1 && group != t->quant.group_size) {
      return unsupported("int linear " + describe(*t) + " has another group size than " + std::to_string(group) +
                         "; a Hugging Face quantization_config holds one");
    }
    group = t->quant.group_size;
  }
  for (const TensorView* t : ints) {
    if (group != -1 && t->quant.group_size >= t->row_length() && t->row_length() > group) {
      return unsupported("int linear " + describe(*t) + " is per-channel but the others use groups of " +
                         std::to_string(group) + "; a Hugging Face quantization_config holds one group size");
    }
  }
  return group;
}

/// Whether an asymmetric group has zero point 0 (GPTQ v1 stores zero − 1).
bool has_zero_zero_point(const std::vector<const TensorView*>& ints) {
  for (const TensorView* t : ints) {
    if (!t->quant.asymmetric) continue;
    for (const IntRow& row : unpack_int_rows(*t)) {
      for (const GroupScale& g : row.groups) {
        if (g.zero == 0) return true;
      }
    }
  }
  return false;
}

Expected<HfQuantConfig> plan_compressed(const std::vector<const TensorView*>& ints, const std::vector<const TensorView*>& fp8s) {
  HfQuantConfig q;
  q.method = HfQuantMethod::kCompressed;
  for (const auto* list : {&ints, &fp8s}) {
    for (const TensorView* t : *list) PEREGRINE_RETURN_IF_ERROR(compressed_can_hold(*t));
  }
  if (!ints.empty()) {
    q.bits = ints.front()->quant.bits;
    q.act_bits = ints.front()->quant.act_bits;
    q.outlier_threshold = ints.front()->quant.outlier_threshold;
  }
  return q;
}

}  // namespace

Expected<HfQuantConfig> plan_hf_quant(const ModelFile& m, HfQuantLayout layout) {
  std::vector<const TensorView*> ints, fp8s;
  PEREGRINE_RETURN_IF_ERROR(collect(m, ints, fp8s));
  if (ints.empty() && fp8s.empty()) return HfQuantConfig{};
  PEREGRINE_RETURN_IF_ERROR(check_common(ints));
  const bool act8 = !ints.empty() && ints.front()->quant.act_bits == 8;
  const bool compressed_fits = std::all_of(ints.begin(), ints.end(), [](const TensorView* t) { return compressed_can_hold(*t).is_ok(); });
  if (layout == HfQuantLayout::kCompressed || !fp8s.empty() || (act8 && compressed_fits)) return plan_compressed(ints, fp8s);
  HfQuantConfig q;
  q.act_bits = ints.front()->quant.act_bits;  // group-wise W4A8: the GPTQ/AWQ layout plus act_bits
  q.outlier_threshold = ints.front()->quant.outlier_threshold;
  q.method = layout == HfQuantLayout::kGptq ? HfQuantMethod::kGptq : HfQuantMethod::kAwq;
  q.bits = ints.front()->quant.bits;
  if (q.method == HfQuantMethod::kAwq && q.bits != 4) {
    return unsupported("int linear " + describe(*ints.front()) + ": the AWQ GEMM layout packs 4-bit weights only (use GPTQ)");
  }
  q.sym = !ints.front()->quant.asymmetric;
  PEREGRINE_ASSIGN_OR_RETURN(q.group_size, common_group_size(ints));
  q.gptq_v2 = q.method == HfQuantMethod::kGptq && has_zero_zero_point(ints);
  return q;
}

}  // namespace peregrine

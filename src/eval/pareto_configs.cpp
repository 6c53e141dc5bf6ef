#include "peregrine/eval/pareto_configs.h"

#include <algorithm>
#include <cctype>

namespace peregrine {
namespace {

ParetoConfig config(std::string name, std::string technique, std::string describe, ParetoRecipe recipe) {
  ParetoConfig c;
  c.name = std::move(name);
  c.technique = std::move(technique);
  c.describe = std::move(describe);
  c.recipe = recipe;
  return c;
}

/// llama-quantize's file type `type` ("Q4_K_M"), named in lower case ("q4_k_m").
ParetoConfig gguf(const std::string& type, const std::string& technique, const std::string& describe) {
  ParetoConfig c = config(type, technique, describe, ParetoRecipe::kQuantize);
  std::transform(c.name.begin(), c.name.end(), c.name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  c.quant.gguf_type = gguf_file_type_from_name(type);
  return c;
}

/// rtn / gptq / awq linears with `bits` and `group` (-1 per channel), F16 embedding and head.
ParetoConfig int_linears(QuantMethod m, int bits, std::int64_t group, const std::string& describe) {
  std::string name(quant_method_name(m));
  name.append("-w").append(std::to_string(bits)).append(group < 0 ? "-pc" : "-g" + std::to_string(group));
  ParetoConfig c = config(name, "int", describe, ParetoRecipe::kQuantize);
  c.quant.method = m;
  c.quant.bits = bits;
  c.quant.group = group;
  c.quant.asymmetric = m == QuantMethod::kAwq;  // AWQ's own format has zero points
  c.quant.act_order = m == QuantMethod::kGptq;
  return c;
}

ParetoConfig eight_bit(const std::string& name, QuantMethod m, const std::string& technique, const std::string& describe) {
  ParetoConfig c = config(name, technique, describe, ParetoRecipe::kQuantize);
  c.quant.method = m;
  c.quant.bits = 8;
  c.quant.group = -1;
  return c;
}

ParetoConfig pruned(const std::string& name, PruneMethod m, SparsityTarget t, int quant_bits, const std::string& describe) {
  ParetoConfig c = config(name, "prune", describe, ParetoRecipe::kPrune);
  c.prune.method = m;
  c.prune.target = t;
  c.prune.quant_bits = quant_bits;
  return c;
}

ParetoConfig kv(const std::string& name, DType type, const std::string& describe) {
  ParetoConfig c = config(name, "kv", describe, ParetoRecipe::kReference);
  c.kv_type = type;
  return c;
}

std::vector<ParetoConfig> make_catalogue() {
  std::vector<ParetoConfig> v;
  v.push_back(config("f32", "float", "the reference: the model's weights dequantized to F32", ParetoRecipe::kReference));
  v.push_back(gguf("F16", "float", "every matrix F16"));
  v.push_back(gguf("BF16", "float", "every matrix BF16"));
  for (const char* t : {"Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "IQ4_XS", "Q3_K_M", "Q2_K"}) {
    v.push_back(gguf(t, "gguf", std::string("llama-quantize's ") + t + " mix (no imatrix)"));
  }
  v.push_back(int_linears(QuantMethod::kRtn, 8, -1, "W8A16: int8 per-channel weights, round to nearest"));
  v.push_back(int_linears(QuantMethod::kRtn, 4, 32, "W4A16 g32, round to nearest"));
  v.push_back(int_linears(QuantMethod::kGptq, 4, 32, "W4A16 g32, GPTQ (act-order)"));
  v.push_back(int_linears(QuantMethod::kAwq, 4, 32, "W4A16 g32 asymmetric, AWQ"));
  v.push_back(int_linears(QuantMethod::kRtn, 3, 32, "W3A16 g32, round to nearest"));
  v.push_back(int_linears(QuantMethod::kGptq, 3, 32, "W3A16 g32, GPTQ (act-order)"));
  v.push_back(int_linears(QuantMethod::kAwq, 3, 32, "W3A16 g32 asymmetric, AWQ"));
  ParetoConfig naive = eight_bit("rtn-w8a8", QuantMethod::kRtn, "w8a8", "W8A8: int8 per-channel weights, per-token int8 activations");
  naive.quant.act_bits = 8;
  v.push_back(naive);
  v.push_back(eight_bit("smoothquant-w8a8", QuantMethod::kSmoothQuant, "w8a8", "W8A8 after SmoothQuant smoothing (alpha 0.5)"));
  v.push_back(eight_bit("llm-int8", QuantMethod::kLlmInt8, "w8a8", "W8A8 with outlier features (|x| >= 6) in f32"));
  v.push_back(eight_bit("fp8-e4m3", QuantMethod::kFp8, "fp8", "FP8 E4M3 per-channel weights"));
  const SparsityTarget two_four{0.0, 2, 4}, half{0.5, 0, 0};
  v.push_back(pruned("magnitude-2:4", PruneMethod::kMagnitude, two_four, 0, "2:4 by |w| (sparse kernels)"));
  v.push_back(pruned("wanda-2:4", PruneMethod::kWanda, two_four, 0, "2:4 by |w| * ||x|| (Wanda)"));
  v.push_back(pruned("sparsegpt-2:4", PruneMethod::kSparseGpt, two_four, 0, "2:4 by SparseGPT's OBS updates"));
  v.push_back(pruned("magnitude-50%", PruneMethod::kMagnitude, half, 0, "50% unstructured by |w|"));
  v.push_back(pruned("wanda-50%", PruneMethod::kWanda, half, 0, "50% unstructured, Wanda"));
  v.push_back(pruned("sparsegpt-50%", PruneMethod::kSparseGpt, half, 0, "50% unstructured, SparseGPT"));
  v.push_back(pruned("sparsegpt-2:4-w4", PruneMethod::kSparseGpt, two_four, 4, "2:4 SparseGPT with 4-bit kept weights"));
  ParetoConfig drop = config("layer-drop-10%", "prune", "a tenth of the blocks removed (the least useful run)", ParetoRecipe::kLayerDrop);
  drop.prune.method = PruneMethod::kLayerDrop;
  drop.drop_fraction = 0.1;
  v.push_back(drop);
  ParetoConfig width = config("width-ffn-75%", "prune", "a quarter of each FFN's channels removed", ParetoRecipe::kPrune);
  width.prune.method = PruneMethod::kWidth;
  width.prune.ffn_keep = 0.75;
  v.push_back(width);
  v.push_back(kv("kv-q8_0", DType::kQ8_0, "F32 weights, Q8_0 KV cache"));
  v.push_back(kv("kv-f8-e4m3", DType::kF8E4M3, "F32 weights, FP8 E4M3 KV cache"));
  return v;
}

bool in_quick_set(const ParetoConfig& c) {
  return c.recipe == ParetoRecipe::kReference || (c.recipe == ParetoRecipe::kQuantize && !c.needs_calibration());
}

}  // namespace

bool ParetoConfig::needs_calibration() const {
  switch (recipe) {
    case ParetoRecipe::kReference: return false;
    case ParetoRecipe::kQuantize: return quant.needs_calibration();
    case ParetoRecipe::kPrune:
    case ParetoRecipe::kLayerDrop: return prune.needs_calibration();
  }
  return false;
}

double ParetoConfig::build_cost() const {
  // Measured on SmolLM2-135M (2 cores, 4096 calibration tokens for quantization, 1024 for
  // pruning), in evaluations of the reference over 2048 tokens.
  if (!needs_calibration()) return 0.0;
  if (recipe == ParetoRecipe::kQuantize && quant.method == QuantMethod::kAwq) return 14.0;
  if (recipe == ParetoRecipe::kQuantize && quant.method == QuantMethod::kGptq) return 8.0;
  if (recipe == ParetoRecipe::kPrune && prune.method == PruneMethod::kSparseGpt) return 7.0;
  return 3.0;
}

std::span<const ParetoConfig> pareto_catalogue() {
  static const std::vector<ParetoConfig> catalogue = make_catalogue();
  return catalogue;
}

Expected<std::vector<ParetoConfig>> select_pareto_configs(std::string_view list) {
  const auto all = pareto_catalogue();
  std::vector<ParetoConfig> out;
  if (list == "all" || list == "quick") {
    for (const ParetoConfig& c : all) {
      if (list == "all" || in_quick_set(c)) out.push_back(c);
    }
    return out;
  }
  out.push_back(all.front());
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string_view name = list.substr(begin, end - begin);
    begin = end + 1;
    if (name.empty() || name == all.front().name) continue;
    const auto it = std::find_if(all.begin(), all.end(), [&](const ParetoConfig& c) { return c.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const ParetoConfig& c : all) known += (known.empty() ? "" : ", ") + c.name;
      return invalid_argument("--configs: unknown configuration '" + std::string(name) + "' (all, quick, or of: " + known + ")");
    }
    if (std::none_of(out.begin(), out.end(), [&](const ParetoConfig& c) { return c.name == name; })) out.push_back(*it);
  }
  return out;
}

}  // namespace peregrine

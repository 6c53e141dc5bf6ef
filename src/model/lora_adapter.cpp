#include "peregrine/model/lora_adapter.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "formats/head_folder.h"
#include "formats/rope_rows.h"
#include "peregrine/core/json_util.h"
#include "peregrine/core/text_file.h"
#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/formats/hf/hf_names.h"
#include "peregrine/formats/safetensors/safetensors.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
constexpr std::string_view kPeftPrefix = "base_model.model.";  // PeftModel → LoraModel → the model
constexpr std::string_view kLayersPrefix = "model.layers.";

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Every row of `t` decoded to f32 (any dtype dequantize_row reads).
std::vector<float> decode(const TensorView& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  const std::int64_t cols = t.row_length();
  for (std::int64_t r = 0; cols > 0 && r < t.n_rows(); ++r) {
    dequantize_row(t, r, std::span<float>(out).subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)));
  }
  return out;
}

// B [out, rank] with its rows moved from pairing `from` to `to` (attn_q / attn_k only).
Status reorder_rope_rows(const std::string& canonical, LoraPair& p, std::int64_t head_dim, RopeStyle from, RopeStyle to) {
  TensorView v;
  v.name = canonical;
  v.dtype = DType::kF32;
  v.shape = {p.out, p.rank};
  v.data = p.b.data();
  v.nbytes = p.b.size() * sizeof(float);
  PEREGRINE_ASSIGN_OR_RETURN(const OwnedTensor t, in_rope_order(v, head_dim, from, to));
  if (t.bytes) std::memcpy(p.b.data(), t.bytes->data(), t.bytes->size());
  return Status::ok();
}

// Which projection `base_name` adapts is unsupported here (embedding / LM head), or ok.
Status check_not_embedding(const std::string& base_name, const std::string& tensor) {
  if (base_name == "token_embd.weight" || base_name == "output.weight") {
    return unsupported("LoRA tensor " + tensor + " adapts " + base_name + ": embedding and LM-head adapters are not supported");
  }
  return Status::ok();
}

// A and B against the base weight `w` [out, in]: A [r, in], B [out, r], r >= 1.
Status check_pair_shapes(const TensorView& w, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                         const std::string& a_name, const std::string& b_name) {
  if (w.shape.size() != 2) return invalid_argument("LoRA tensor " + a_name + " adapts " + w.name + ", which is not a matrix");
  const std::int64_t out = w.shape[0], in = w.shape[1];
  if (a.size() != 2 || a[1] != in || a[0] < 1) {
    if (a.size() == 2 && a[0] == 0) return invalid_argument("LoRA tensor " + a_name + " has rank 0");
    return invalid_argument("LoRA tensor " + a_name + " is " + shape_string(a) + ", expected [r, " + std::to_string(in) + "] for " +
                            w.name + " " + w.shape_string());
  }
  if (b.size() != 2 || b[0] != out || b[1] != a[0]) {
    return invalid_argument("LoRA tensor " + b_name + " is " + shape_string(b) + ", expected [" + std::to_string(out) + ", " +
                            std::to_string(a[0]) + "] for " + w.name + " " + w.shape_string() + " and its A of rank " +
                            std::to_string(a[0]));
  }
  return Status::ok();
}

// Records one decoded pair, checking that every pair shares the adapter's rank.
Status add_pair(LoraAdapter& adapter, const std::string& canonical, LoraPair pair, const std::string& tensor) {
  if (adapter.rank == 0) adapter.rank = pair.rank;
  if (pair.rank != adapter.rank) {
    return unsupported("LoRA tensor " + tensor + " has rank " + std::to_string(pair.rank) + ", others " +
                       std::to_string(adapter.rank) + ": a rank per module is not supported");
  }
  adapter.tensors[canonical] = std::move(pair);
  return Status::ok();
}

// ---- PEFT ----------------------------------------------------------------------------------

// The canonical per-layer suffix of the Hugging Face module leaf `leaf` ("q_proj") in any
// position hf_names.h knows (attention, dense FFN, MoE experts and shared expert, routers).
bool known_module_leaf(const std::string& leaf, const Architecture* family) {
  for (const char* parent : {"self_attn.", "mlp.", "mlp.experts.0.", "block_sparse_moe.experts.0.", "block_sparse_moe.",
                             "mlp.shared_expert.", ""}) {
    const auto canonical = canonical_layer_name(std::string(parent) + leaf + ".weight", family);
    if (canonical && !is_norm_weight(*canonical)) return true;
  }
  return false;
}

// PEFT's target matching (tuners_utils check_target_module_exists): the module's name equals
// the key or ends with "." + key.
bool module_matches(const std::string& module, const std::string& key) {
  return module == key || (module.size() > key.size() && module.ends_with("." + key));
}

struct PeftConfig {
  std::int64_t r = 0;
  float alpha = 0.0f;
  bool rslora = false;
  bool all_linear = false;
  std::vector<std::string> targets;
};

bool is_empty_field(const nlohmann::json& c, const char* key) {
  const auto it = c.find(key);
  return it == c.end() || it->is_null() || (it->is_object() && it->empty()) || (it->is_array() && it->empty());
}

Expected<PeftConfig> read_peft_config(const std::string& dir, const Architecture* family) {
  const std::string path = dir + "/" + kConfigFile;
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  PEREGRINE_ASSIGN_OR_RETURN(const nlohmann::json c, json_util::parse(text, path));
  if (!c.is_object()) return corrupt_file(path + ": not a JSON object");
  PeftConfig out;
  const auto field = [&](const char* key) -> const nlohmann::json* {
    const auto it = c.find(key);
    return it == c.end() || it->is_null() ? nullptr : &*it;
  };
  if (const auto* t = field("peft_type"); t && (!t->is_string() || t->get<std::string>() != "LORA")) {
    return invalid_argument(path + ": peft_type " + t->dump() + " is not \"LORA\"");
  }
  const auto* r = field("r");
  const auto rank = r ? json_util::as_i64(*r) : std::nullopt;
  if (!rank) return corrupt_file(path + ": \"r\" is missing or not an integer");
  if (*rank < 1) return invalid_argument(path + ": rank r = " + std::to_string(*rank) + " (must be >= 1)");
  out.r = *rank;
  const auto* alpha = field("lora_alpha");
  if (alpha == nullptr || !alpha->is_number() || !std::isfinite(alpha->get<double>())) {
    return corrupt_file(path + ": \"lora_alpha\" is missing or not a number");
  }
  out.alpha = alpha->get<float>();
  for (const char* key : {"use_rslora", "fan_in_fan_out", "use_dora", "lora_bias"}) {
    if (const auto* v = field(key); v && !v->is_boolean()) return corrupt_file(path + ": \"" + key + "\" is not a boolean");
  }
  out.rslora = c.value("use_rslora", false);
  if (const auto* bias = field("bias"); bias && *bias != "none") {
    return invalid_argument(path + ": bias " + bias->dump() + " is not supported (only \"none\": the adapter would change biases)");
  }
  if (field("fan_in_fan_out") && c["fan_in_fan_out"].get<bool>()) {
    return invalid_argument(path + ": fan_in_fan_out (GPT-2 Conv1D weights stored [in, out]) is not supported");
  }
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (!is_empty_field(c, key)) {
      return unsupported(path + ": \"" + key + "\" " + json_util::printable(c[key].dump()) +
                         " gives some modules their own rank or alpha: not supported (one r and lora_alpha for all)");
    }
  }
  if (field("use_dora") && c["use_dora"].get<bool>()) return unsupported(path + ": DoRA adapters (use_dora) are not supported");
  if (field("lora_bias") && c["lora_bias"].get<bool>()) return unsupported(path + ": lora_bias (a bias on B) is not supported");
  if (!is_empty_field(c, "modules_to_save")) {
    return unsupported(path + ": modules_to_save " + json_util::printable(c["modules_to_save"].dump()) +
                       " (fully trained modules) are not supported");
  }
  const auto* targets = field("target_modules");
  if (targets == nullptr) return corrupt_file(path + ": \"target_modules\" is missing");
  if (targets->is_string()) {
    if (targets->get<std::string>() != "all-linear") {
      return unsupported(path + ": target_modules '" + json_util::printable(targets->get<std::string>()) +
                         "' is a regular expression: not supported, list the module names");
    }
    out.all_linear = true;
    return out;
  }
  if (!targets->is_array()) return corrupt_file(path + ": \"target_modules\" is not a list of module names");
  for (const nlohmann::json& t : *targets) {
    if (!t.is_string()) return corrupt_file(path + ": target_modules holds " + json_util::type_name(t) + ", not a module name");
    const std::string name = t.get<std::string>();
    const std::string leaf = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    if (leaf == "lm_head" || leaf == "embed_tokens") {
      return unsupported(path + ": target module '" + name + "': embedding and LM-head adapters are not supported");
    }
    if (!known_module_leaf(leaf, family)) {
      return invalid_argument(path + ": target module '" + json_util::printable(name) + "' is not a weight the base model has");
    }
    out.targets.push_back(name);
  }
  return out;
}

// A PEFT key "base_model.model.<module>.lora_{A,B}.weight" → module and whether it is A.
struct PeftKey {
  std::string module;  // "model.layers.3.self_attn.q_proj"
  bool is_a = false;
};

Expected<PeftKey> parse_peft_key(const std::string& key) {
  const std::string where = "LoRA tensor " + json_util::printable(key, 120);
  if (key.find("lora_embedding_") != std::string::npos) return unsupported(where + ": embedding adapters are not supported");
  if (key.ends_with(".lora_B.bias")) return unsupported(where + ": lora_bias (a bias on B) is not supported");
  if (key.find("lora_magnitude_vector") != std::string::npos) return unsupported(where + ": DoRA adapters are not supported");
  PeftKey out;
  std::string_view k = key;
  if (k.ends_with(".lora_A.weight")) {
    out.is_a = true;
  } else if (!k.ends_with(".lora_B.weight")) {
    return corrupt_file(where + " is not PEFT's <module>.lora_A.weight / .lora_B.weight");
  }
  k.remove_suffix(std::string_view(".lora_A.weight").size());
  if (!k.starts_with(kPeftPrefix)) return corrupt_file(where + " does not start with " + std::string(kPeftPrefix));
  k.remove_prefix(kPeftPrefix.size());
  out.module = std::string(k);
  return out;
}

// The canonical base weight a PEFT module adapts ("model.layers.3.self_attn.q_proj" →
// "blk.3.attn_q.weight").
Expected<std::string> canonical_of_module(const std::string& module, const std::string& tensor, const Architecture* family) {
  const std::string leaf = module.substr(module.rfind('.') == std::string::npos ? 0 : module.rfind('.') + 1);
  if (leaf == "lm_head" || leaf == "embed_tokens") {
    return unsupported("LoRA tensor " + tensor + " adapts " + module + ": embedding and LM-head adapters are not supported");
  }
  const std::string_view m = module;
  const std::size_t dot = m.find('.', kLayersPrefix.size());
  if (m.starts_with(kLayersPrefix) && dot != std::string_view::npos) {
    const std::string layer(m.substr(kLayersPrefix.size(), dot - kLayersPrefix.size()));
    if (const auto suffix = canonical_layer_name(std::string(m.substr(dot + 1)) + ".weight", family);
        suffix && layer.find_first_not_of("0123456789") == std::string::npos && !layer.empty()) {
      return "blk." + layer + "." + *suffix;
    }
  }
  return invalid_argument("LoRA tensor " + tensor + " adapts module " + json_util::printable(module) +
                          ", which is not a weight the base model has");
}

Expected<LoraAdapter> load_peft(const std::string& dir, const ModelFile& base) {
  const Architecture* family = find_architecture(base.config.arch);
  for (const char* f : {kConfigFile, kWeightsFile}) {
    if (!std::filesystem::is_regular_file(dir + "/" + f)) return not_found(dir + " has no " + f + " (not a PEFT LoRA adapter folder)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(const PeftConfig config, read_peft_config(dir, family));
  PEREGRINE_ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::open(dir + "/" + kWeightsFile));
  LoraAdapter adapter;
  adapter.path = dir;
  adapter.alpha = config.alpha;
  adapter.rslora = config.rslora;
  std::map<std::string, std::pair<const SafetensorsTensor*, const SafetensorsTensor*>> modules;  // A, B
  for (const SafetensorsTensor& t : file.tensors()) {
    PEREGRINE_ASSIGN_OR_RETURN(const PeftKey key, parse_peft_key(t.name));
    auto& slot = modules[key.module];
    (key.is_a ? slot.first : slot.second) = &t;
  }
  if (modules.empty()) return corrupt_file(dir + "/" + kWeightsFile + " holds no LoRA tensors");
  for (const auto& [module, ab] : modules) {
    const SafetensorsTensor* any = ab.first ? ab.first : ab.second;
    if (!ab.first || !ab.second) {
      return corrupt_file("LoRA tensor " + any->name + " has no " + (ab.first ? "lora_B" : "lora_A") + " partner");
    }
    const std::string& a_name = ab.first->name;
    PEREGRINE_ASSIGN_OR_RETURN(const std::string canonical, canonical_of_module(module, a_name, family));
    if (!config.all_linear) {
      bool listed = false;
      for (const std::string& t : config.targets) listed = listed || module_matches(module, t);
      if (!listed) return corrupt_file("LoRA tensor " + a_name + " adapts " + module + ", which target_modules does not list");
    }
    const TensorView* w = base.find(canonical);
    if (w == nullptr) {
      return invalid_argument("LoRA tensor " + a_name + " adapts " + canonical + ", which the base model does not have");
    }
    PEREGRINE_RETURN_IF_ERROR(check_pair_shapes(*w, ab.first->shape, ab.second->shape, a_name, ab.second->name));
    if (ab.first->shape[0] != config.r) {
      return invalid_argument("LoRA tensor " + a_name + " has rank " + std::to_string(ab.first->shape[0]) + ", adapter_config.json r " +
                              std::to_string(config.r));
    }
    LoraPair pair;
    pair.rank = config.r;
    pair.out = w->shape[0];
    pair.in = w->shape[1];
    for (const SafetensorsTensor* t : {ab.first, ab.second}) {
      const auto view = t->weight_view();
      if (!view) {
        return unsupported("LoRA tensor " + t->name + " is " + std::string(safetensors_dtype_name(t->dtype)) + ": only F32, F16, BF16");
      }
      (t == ab.first ? pair.a : pair.b) = decode(*view);
    }
    PEREGRINE_RETURN_IF_ERROR(reorder_rope_rows(canonical, pair, base.config.head_dim, RopeStyle::kNeox, base.config.rope_style));
    PEREGRINE_RETURN_IF_ERROR(add_pair(adapter, canonical, std::move(pair), a_name));
  }
  return adapter;
}

// ---- llama.cpp GGUF ------------------------------------------------------------------------

// "'value'" of a metadata string, or "absent".
std::string quoted_or_absent(const Expected<std::string>& v) {
  if (!v) return "absent";
  std::string s = "'";
  s += json_util::printable(*v);
  s += "'";
  return s;
}

Expected<LoraAdapter> load_gguf(const std::string& path, const ModelFile& base) {
  PEREGRINE_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::open(path));
  const auto type = file.get_string("general.type");
  if (!type || *type != "adapter") {
    return invalid_argument(path + " is not a LoRA adapter (general.type " + quoted_or_absent(type) + ", expected 'adapter')");
  }
  const auto adapter_type = file.get_string("adapter.type");
  if (!adapter_type || *adapter_type != "lora") {
    return invalid_argument(path + " is not a LoRA adapter (adapter.type " + quoted_or_absent(adapter_type) + ", expected 'lora')");
  }
  const auto arch = file.get_string("general.architecture");
  if (!arch || *arch != base.config.arch) {
    return invalid_argument(path + " is a LoRA adapter for architecture '" + (arch ? json_util::printable(*arch) : std::string()) +
                            "', the base model is '" + base.config.arch + "'");
  }
  const Architecture* family = find_architecture(*arch);
  if (family == nullptr) return unsupported(path + ": architecture '" + *arch + "' is not supported");
  LoraAdapter adapter;
  adapter.path = path;
  if (file.find("adapter.lora.alpha") != nullptr) {
    PEREGRINE_ASSIGN_OR_RETURN(const double alpha, file.get_float("adapter.lora.alpha"));
    adapter.alpha = static_cast<float>(alpha);
  }
  std::map<std::string, std::pair<const TensorView*, const TensorView*>> pairs;  // A, B by base name
  for (const TensorView& t : file.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a");
    if (!is_a && !t.name.ends_with(".lora_b")) {
      if (t.name.ends_with("_norm.weight")) continue;  // mergekit's norms: llama.cpp skips them too
      return corrupt_file("LoRA tensor " + t.name + " in " + path + " has neither suffix .lora_a nor .lora_b");
    }
    auto& slot = pairs[t.name.substr(0, t.name.size() - 7)];
    (is_a ? slot.first : slot.second) = &t;
  }
  if (pairs.empty()) return corrupt_file(path + " holds no LoRA tensors");
  for (const auto& [name, ab] : pairs) {
    const TensorView* any = ab.first ? ab.first : ab.second;
    if (!ab.first || !ab.second) return corrupt_file("LoRA tensor " + any->name + " has no " + (ab.first ? ".lora_b" : ".lora_a") + " partner");
    PEREGRINE_RETURN_IF_ERROR(check_not_embedding(name, ab.first->name));
    const TensorView* w = base.find(name);
    if (w == nullptr) return invalid_argument("LoRA tensor " + ab.first->name + " adapts " + name + ", which the base model does not have");
    PEREGRINE_RETURN_IF_ERROR(check_pair_shapes(*w, ab.first->shape, ab.second->shape, ab.first->name, ab.second->name));
    LoraPair pair;
    pair.rank = ab.first->shape[0];
    pair.out = w->shape[0];
    pair.in = w->shape[1];
    pair.a = decode(*ab.first);
    pair.b = decode(*ab.second);
    PEREGRINE_RETURN_IF_ERROR(reorder_rope_rows(name, pair, base.config.head_dim, family->gguf_rope_style, base.config.rope_style));
    PEREGRINE_RETURN_IF_ERROR(add_pair(adapter, name, std::move(pair), ab.first->name));
  }
  // llama_adapter_lora_weight::get_scale: alpha 0 (or absent) means scale 1.
  if (adapter.alpha == 0.0f) adapter.alpha = static_cast<float>(adapter.rank);
  return adapter;
}

}  // namespace

float LoraAdapter::scale() const {
  if (rank < 1) return 0.0f;
  const auto r = static_cast<float>(rank);
  return rslora ? alpha / std::sqrt(r) : alpha / r;
}

Expected<LoraAdapter> load_lora_adapter(const std::string& path, const ModelFile& base) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return not_found("LoRA adapter " + path + " does not exist");
  Expected<LoraAdapter> adapter = unsupported("");
  if (std::filesystem::is_directory(status)) {
    adapter = load_peft(path, base);
  } else if (is_gguf_file(path)) {
    adapter = load_gguf(path, base);
  } else {
    return invalid_argument(path + " is neither a PEFT adapter folder nor a GGUF LoRA adapter");
  }
  if (adapter) {
    adapter->arch = base.config.arch;
    adapter->rope_style = base.config.rope_style;
    adapter->head_dim = base.config.head_dim;
  }
  return adapter;
}

Status save_peft_adapter(const LoraAdapter& adapter, const std::string& dir, const std::string& base_model) {
  if (adapter.rank < 1) return invalid_argument("save_peft_adapter: rank " + std::to_string(adapter.rank) + " (must be >= 1)");
  const Architecture* family = find_architecture(adapter.arch);
  std::vector<head_folder::Entry> layout;
  std::map<std::string, std::vector<float>> tensors;
  std::set<std::string> targets;
  for (const auto& [name, p] : adapter.tensors) {
    const auto n = [](std::int64_t x, std::int64_t y) { return static_cast<std::size_t>(x * y); };
    if (p.rank != adapter.rank || p.in < 1 || p.out < 1 || p.a.size() != n(p.rank, p.in) || p.b.size() != n(p.out, p.rank)) {
      return invalid_argument("save_peft_adapter: tensor " + name + " is not A [" + std::to_string(adapter.rank) + ", in] and B [out, " +
                              std::to_string(adapter.rank) + "] of its sizes");
    }
    const auto hf = hf_tensor_name(name, family);
    if (!hf || !hf->starts_with(kLayersPrefix) || !hf->ends_with(".weight") || is_norm_weight(name)) {
      return invalid_argument("save_peft_adapter: " + name + " is not a canonical layer weight");
    }
    const std::string module = std::string(kPeftPrefix) + hf->substr(0, hf->size() - 7);
    targets.insert(module.substr(module.rfind('.') + 1));
    LoraPair q = p;
    if (adapter.rope_style != RopeStyle::kNeox && (name.ends_with(".attn_q.weight") || name.ends_with(".attn_k.weight")) &&
        adapter.head_dim < 2) {
      return invalid_argument("save_peft_adapter: interleaved Q/K rows of " + name + " need the base's head_dim");
    }
    PEREGRINE_RETURN_IF_ERROR(reorder_rope_rows(name, q, adapter.head_dim, adapter.rope_style, RopeStyle::kNeox));
    layout.push_back({module + ".lora_A.weight", {p.rank, p.in}});
    layout.push_back({module + ".lora_B.weight", {p.out, p.rank}});
    tensors[layout[layout.size() - 2].name] = std::move(q.a);
    tensors[layout.back().name] = std::move(q.b);
  }
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", adapter.rank},
      {"lora_alpha", head_folder::shortest_decimal(adapter.alpha)},
      {"use_rslora", adapter.rslora},
      {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"lora_dropout", 0.0},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"inference_mode", true},
      {"base_model_name_or_path", base_model},
  };
  return head_folder::write(dir, config, kWeightsFile, layout, tensors, "save_peft_adapter", kConfigFile);
}

}  // namespace peregrine

#include "peregrine/model/synth_lora.h"

#include <cmath>
#include <random>
#include <utility>

namespace peregrine {

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  return names;
}

Expected<std::string> lora_target_name(const std::string& target) {
  static const std::vector<std::pair<std::string, std::string>> stems = {
      {"q", "attn_q"}, {"k", "attn_k"}, {"v", "attn_v"}, {"o", "attn_output"},
      {"gate", "ffn_gate"}, {"up", "ffn_up"}, {"down", "ffn_down"}};
  for (const auto& [stem, name] : stems) {
    if (target == stem || target == stem + "_proj" || target == name) return name;
  }
  return invalid_argument("unknown LoRA target '" + target + "' (q, k, v, o, gate, up, down)");
}

Expected<LoraAdapter> synth_lora_adapter(const ModelFile& base, const LoraSynthOptions& o) {
  if (o.rank < 1) return invalid_argument("a LoRA rank must be >= 1");
  if (!std::isfinite(o.stddev) || o.stddev < 0.0f) return invalid_argument("a LoRA stddev must be finite and >= 0");
  if (o.targets.empty()) return invalid_argument("a LoRA adapter needs at least one target");
  LoraAdapter a;
  a.rank = o.rank;
  a.alpha = o.alpha;
  a.arch = base.config.arch;  // the base's Q/K row order, for save_peft_adapter
  a.rope_style = base.config.rope_style;
  a.head_dim = base.config.head_dim;
  std::mt19937 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, o.stddev);
  for (std::int64_t l = 0; l < base.config.n_layers; ++l) {
    for (const std::string& target : o.targets) {
      PEREGRINE_ASSIGN_OR_RETURN(const std::string canonical, lora_target_name(target));
      if (canonical != target) return invalid_argument("LoRA target '" + target + "' is not canonical (" + canonical + ")");
      const std::string name = layer_tensor_name(l, target);
      const TensorView* w = base.find(name);
      if (w == nullptr || w->shape.size() != 2) return invalid_argument("the base has no matrix " + name + " to adapt");
      LoraPair p{o.rank, w->shape[1], w->shape[0], {}, {}};
      p.a.resize(static_cast<std::size_t>(o.rank * p.in));
      p.b.resize(static_cast<std::size_t>(p.out * o.rank));
      for (float& v : p.a) v = normal(rng);
      for (float& v : p.b) v = normal(rng);
      a.tensors[name] = std::move(p);
    }
  }
  return a;
}

}  // namespace peregrine

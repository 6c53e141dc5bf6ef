#include "peregrine/formats/hf/hf_names.h"

#include <span>

namespace peregrine {
namespace {

using NamePair = std::pair<std::string_view, std::string_view>;
using NameTable = std::span<const NamePair>;

// Router and shared expert (HF suffix ↔ canonical suffix) of each MoE naming.
constexpr NamePair kMixtralNames[] = {{"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}};
constexpr NamePair kQwenMoeNames[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};

// An expert's module prefix and its three projections (HF name, canonical proj), per naming.
struct ExpertNames {
  std::string_view prefix;  // "<prefix>E.<proj>.weight"
  NamePair projections[3];
};
constexpr ExpertNames kMixtralExperts = {"block_sparse_moe.experts.", {{"w1", "ffn_gate"}, {"w3", "ffn_up"}, {"w2", "ffn_down"}}};
constexpr ExpertNames kQwenMoeExperts = {"mlp.experts.", {{"gate_proj", "ffn_gate"}, {"up_proj", "ffn_up"}, {"down_proj", "ffn_down"}}};

const ExpertNames& expert_names(HfMoeNaming naming) { return naming == HfMoeNaming::kMixtral ? kMixtralExperts : kQwenMoeExperts; }

NameTable moe_names(HfMoeNaming naming) {
  if (naming == HfMoeNaming::kMixtral) return kMixtralNames;
  return kQwenMoeNames;
}

HfMoeNaming naming_of(const Architecture* family) { return family ? family->hf_moe_naming : HfMoeNaming::kMixtral; }

bool is_index(std::string_view s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string_view::npos && (s.size() == 1 || s[0] != '0');
}

// "E.<proj>.weight" after an expert prefix → "<canonical proj>.E.weight".
std::optional<std::string> canonical_expert(std::string_view rest, const ExpertNames& names) {
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !is_index(rest.substr(0, dot))) return std::nullopt;
  const std::string_view expert = rest.substr(0, dot), tail = rest.substr(dot + 1);
  for (const auto& [hf, canonical] : names.projections) {
    if (tail == std::string(hf) + ".weight") return std::string(canonical) + "." + std::string(expert) + ".weight";
  }
  return std::nullopt;
}

// "<canonical proj>.E.weight" → "<prefix>E.<hf proj>.weight" under `names`.
std::optional<std::string> hf_expert(std::string_view rest, const ExpertNames& names) {
  for (const auto& [hf, canonical] : names.projections) {
    if (!rest.starts_with(canonical) || rest.size() <= canonical.size() || rest[canonical.size()] != '.') continue;
    std::string_view index = rest.substr(canonical.size() + 1);
    if (!index.ends_with(".weight")) continue;
    index.remove_suffix(std::string_view(".weight").size());
    if (is_index(index)) return std::string(names.prefix) + std::string(index) + "." + std::string(hf) + ".weight";
  }
  return std::nullopt;
}

/// `key`'s partner in the per-layer tables of `family` (Gemma 2's post-norm names first): its
/// canonical suffix when `key` is an HF suffix (to_canonical), else its HF suffix.
std::optional<std::string_view> find_layer_name(std::string_view key, const Architecture* family, bool to_canonical) {
  const auto search = [&](NameTable table) -> std::optional<std::string_view> {
    for (const auto& [hf, canonical] : table) {
      if ((to_canonical ? hf : canonical) == key) return to_canonical ? canonical : hf;
    }
    return std::nullopt;
  };
  if (family != nullptr && family->post_norms) {
    if (const auto found = search(kHfPostNormLayerNames)) return found;
  }
  return search(kHfLayerNames);
}

}  // namespace

std::optional<std::string> canonical_layer_name(std::string_view hf, const Architecture* family) {
  if (const auto found = find_layer_name(hf, family, true)) return std::string(*found);
  for (HfMoeNaming naming : {HfMoeNaming::kMixtral, HfMoeNaming::kQwenMoe}) {
    for (const auto& [from, to] : moe_names(naming)) {
      if (hf == from) return std::string(to);
    }
    const ExpertNames& names = expert_names(naming);
    if (hf.starts_with(names.prefix)) return canonical_expert(hf.substr(names.prefix.size()), names);
  }
  return std::nullopt;
}

std::optional<std::string> hf_tensor_name(std::string_view canonical, const Architecture* family) {
  for (const auto& [hf, name] : kHfModelNames) {
    if (name == canonical) return std::string(hf);
  }
  constexpr std::string_view kPrefix = "blk.";
  if (canonical.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view rest = canonical.substr(kPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !is_index(rest.substr(0, dot))) return std::nullopt;
  const std::string layer_prefix = "model.layers." + std::string(rest.substr(0, dot)) + ".";
  const std::string_view suffix = rest.substr(dot + 1);
  if (const auto hf = find_layer_name(suffix, family, false)) return layer_prefix + std::string(*hf);
  for (const auto& [hf, name] : moe_names(naming_of(family))) {
    if (name == suffix) return layer_prefix + std::string(hf);
  }
  if (auto expert = hf_expert(suffix, expert_names(naming_of(family)))) return layer_prefix + *expert;
  return std::nullopt;
}

}  // namespace peregrine

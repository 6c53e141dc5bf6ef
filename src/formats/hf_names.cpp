#include "peregrine/formats/hf_names.h"

#include <span>

namespace peregrine {

namespace {

using NameTable = std::span<const std::pair<std::string_view, std::string_view>>;

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

std::optional<std::string_view> canonical_layer_name(std::string_view hf, const Architecture* family) {
  return find_layer_name(hf, family, true);
}

std::optional<std::string> hf_tensor_name(std::string_view canonical, const Architecture* family) {
  for (const auto& [hf, name] : kHfModelNames) {
    if (name == canonical) return std::string(hf);
  }
  constexpr std::string_view kPrefix = "blk.";
  if (canonical.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view rest = canonical.substr(kPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  const std::string_view layer = rest.substr(0, dot);
  if (layer.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const auto hf = find_layer_name(rest.substr(dot + 1), family, false);
  if (!hf) return std::nullopt;
  return "model.layers." + std::string(layer) + "." + std::string(*hf);
}

}  // namespace peregrine

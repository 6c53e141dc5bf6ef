#include "peregrine/formats/hf_names.h"

namespace peregrine {

namespace {

/// The HF per-layer suffix of canonical suffix `name` in `family`.
std::optional<std::string_view> hf_layer_name(std::string_view name, const Architecture* family) {
  if (family != nullptr && family->post_norms) {
    for (const auto& [hf, canonical] : kHfPostNormLayerNames) {
      if (canonical == name) return hf;
    }
  }
  for (const auto& [hf, canonical] : kHfLayerNames) {
    if (canonical == name) return hf;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string_view> canonical_layer_name(std::string_view hf, const Architecture* family) {
  if (family != nullptr && family->post_norms) {
    for (const auto& [from, to] : kHfPostNormLayerNames) {
      if (from == hf) return to;
    }
  }
  for (const auto& [from, to] : kHfLayerNames) {
    if (from == hf) return to;
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
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  const std::string_view layer = rest.substr(0, dot);
  if (layer.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const auto hf = hf_layer_name(rest.substr(dot + 1), family);
  if (!hf) return std::nullopt;
  return "model.layers." + std::string(layer) + "." + std::string(*hf);
}

}  // namespace peregrine

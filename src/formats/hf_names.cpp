#include "peregrine/formats/hf_names.h"

namespace peregrine {

std::optional<std::string> hf_tensor_name(std::string_view canonical) {
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
  for (const auto& [hf, name] : kHfLayerNames) {
    if (name == rest.substr(dot + 1)) return "model.layers." + std::string(layer) + "." + std::string(hf);
  }
  return std::nullopt;
}

}  // namespace peregrine

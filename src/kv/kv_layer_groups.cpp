#include "peregrine/kv/kv_layer_groups.h"

#include <map>
#include <numeric>

namespace peregrine {

KvLayerGroups kv_layer_groups(const KvShape& shape) {
  std::map<std::int64_t, std::vector<std::int64_t>> by_window;  // window → its layers, in order
  for (std::int64_t l = 0; l < shape.n_layers; ++l) by_window[shape.window(l)].push_back(l);
  KvLayerGroups g;
  for (const auto& [window, layers] : by_window) {
    g.layers_per_group = std::gcd(g.layers_per_group, static_cast<std::int64_t>(layers.size()));
  }
  g.layer_group.resize(static_cast<std::size_t>(shape.n_layers));
  g.layer_slot.resize(g.layer_group.size());
  for (const auto& [window, layers] : by_window) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto slot = static_cast<std::int64_t>(i) % g.layers_per_group;
      if (slot == 0) g.group_windows.push_back(window);
      g.layer_group[static_cast<std::size_t>(layers[i])] = g.n_groups() - 1;
      g.layer_slot[static_cast<std::size_t>(layers[i])] = static_cast<std::int32_t>(slot);
    }
  }
  return g;
}

}  // namespace peregrine

#include "peregrine/model/pipeline_parallel.h"

#include <string>

namespace peregrine {

LayerRange pipeline_layers(std::int64_t n_layers, int stage, int n_stages) {
  return {n_layers * stage / n_stages, n_layers * (stage + 1) / n_stages};
}

Expected<ModelFile> shard_pipeline_stage(const ModelFile& full, int stage, int n_stages) {
  const std::int64_t n_layers = full.config.n_layers;
  if (n_stages < 1 || n_stages > n_layers || stage < 0 || stage >= n_stages) {
    return invalid_argument("pipeline stage " + std::to_string(stage) + " of " + std::to_string(n_stages) + " over " +
                            std::to_string(n_layers) + " layers is out of range (at most one stage per layer)");
  }
  if (n_stages == 1) return full;
  const LayerRange range = pipeline_layers(n_layers, stage, n_stages);
  ModelFile shard;
  shard.format = full.format;
  shard.path = full.path;
  shard.config = full.config;
  shard.config.n_layers = range.last - range.first;
  shard.config.first_layer = full.config.first_layer + range.first;
  shard.storage = full.storage;
  shard.gguf = full.gguf;
  for (const auto& [name, t] : full.tensors) {
    if (name.rfind("blk.", 0) != 0) {
      shard.tensors.emplace(name, t);
      continue;
    }
    const std::size_t dot = name.find('.', 4);
    const std::int64_t layer = std::stoll(name.substr(4, dot - 4));
    if (layer < range.first || layer >= range.last) continue;
    TensorView v = t;
    v.name = "blk." + std::to_string(layer - range.first) + name.substr(dot);
    shard.tensors.emplace(v.name, std::move(v));
  }
  return shard;
}

}  // namespace peregrine

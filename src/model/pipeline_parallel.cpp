#include "peregrine/model/pipeline_parallel.h"

#include <optional>
#include <string>

namespace peregrine {

LayerRange pipeline_layers(std::int64_t n_layers, int stage, int n_stages) {
  return {n_layers * stage / n_stages, n_layers * (stage + 1) / n_stages};
}

namespace {

Expected<LayerRange> stage_range(std::int64_t n_layers, int stage, int n_stages) {
  if (n_stages < 1 || n_stages > n_layers || stage < 0 || stage >= n_stages) {
    return invalid_argument("pipeline stage " + std::to_string(stage) + " of " + std::to_string(n_stages) + " over " +
                            std::to_string(n_layers) + " layers is out of range (at most one stage per layer)");
  }
  return pipeline_layers(n_layers, stage, n_stages);
}

// A tensor's name in the stage of `range`: "blk.L.<rest>" → "blk.(L - first).<rest>", nullopt
// for a layer outside the range; other names as they are.
std::optional<std::string> stage_name(const std::string& name, const LayerRange& range) {
  if (name.rfind("blk.", 0) != 0) return name;
  const std::size_t dot = name.find('.', 4);
  const std::int64_t layer = std::stoll(name.substr(4, dot - 4));
  if (layer < range.first || layer >= range.last) return std::nullopt;
  return "blk." + std::to_string(layer - range.first) + name.substr(dot);
}

}  // namespace

Expected<LoraAdapter> stage_lora_adapter(const LoraAdapter& full, std::int64_t n_layers, int stage, int n_stages) {
  PEREGRINE_ASSIGN_OR_RETURN(const LayerRange range, stage_range(n_layers, stage, n_stages));
  LoraAdapter out = full;
  out.tensors.clear();
  for (const auto& [name, pair] : full.tensors) {
    if (const std::optional<std::string> renamed = stage_name(name, range)) out.tensors.emplace(*renamed, pair);
  }
  return out;
}

Expected<ModelFile> shard_pipeline_stage(const ModelFile& full, int stage, int n_stages) {
  PEREGRINE_ASSIGN_OR_RETURN(const LayerRange range, stage_range(full.config.n_layers, stage, n_stages));
  if (n_stages == 1) return full;
  ModelFile shard;
  shard.format = full.format;
  shard.path = full.path;
  shard.config = full.config;
  shard.config.n_layers = range.last - range.first;
  shard.config.first_layer = full.config.first_layer + range.first;
  shard.storage = full.storage;
  shard.gguf = full.gguf;
  for (const auto& [name, t] : full.tensors) {
    const std::optional<std::string> renamed = stage_name(name, range);
    if (!renamed) continue;
    TensorView v = t;
    v.name = *renamed;
    shard.tensors.emplace(v.name, std::move(v));
  }
  return shard;
}

}  // namespace peregrine

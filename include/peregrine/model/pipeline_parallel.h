// Pipeline parallelism (GPipe, Huang et al. 2019; Narayanan et al. 2021): P ranks ("stages")
// each hold a contiguous range of the decoder layers. Stage 0 embeds the tokens and runs its
// layers; each stage sends the residual stream [n_rows, dim] to the next; the last one runs the
// final norm and the LM head and broadcasts the logits back, so that every stage samples the same
// token. A stage's model file holds its layers only, renumbered from 0 (ModelConfig::first_layer
// keeps their place in the whole model), so its KV cache holds its layers only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// A stage's links to its neighbours (dist/ implements them over MPI; the tests over threads).
/// Every stage runs the same forwards (the same batches, in the same order).
class PipelineStageLink {
 public:
  virtual ~PipelineStageLink() = default;
  /// This stage's index in [0, n_stages()).
  virtual int stage() const = 0;
  virtual int n_stages() const = 0;
  /// The previous stage's residual stream [n_rows, dim] f32 into x (x.size() = n_rows · dim).
  virtual void recv_hidden(std::span<float> x) = 0;
  /// This stage's residual stream to the next stage.
  virtual void send_hidden(std::span<const float> x) = 0;
  /// The last stage's logits [n_logits, vocab] f32 into every stage's `logits` (already sized
  /// by the caller on every stage).
  virtual void broadcast_logits(std::span<float> logits) = 0;
};

/// The decoder layers [first, last) of stage `stage` of `n_stages` over n_layers layers: as equal
/// as possible, earlier stages taking the remainder's smaller share (first = n_layers·stage /
/// n_stages). Precondition: 1 <= n_stages <= n_layers, 0 <= stage < n_stages.
struct LayerRange {
  std::int64_t first, last;
};
LayerRange pipeline_layers(std::int64_t n_layers, int stage, int n_stages);

/// Stage `stage` of `n_stages`'s file: the tensors of its layers renamed blk.0 .. blk.(k-1)
/// (views of `full`'s bytes, whose storage it shares), every tensor outside the layers
/// (embedding, final norm, LM head, rope_freqs) kept, config.n_layers = k and
/// config.first_layer = its first layer's index in `full`. n_stages 1 returns `full` as is.
/// Errors: kInvalidArgument (n_stages < 1 or above the model's layers, stage out of range).
Expected<ModelFile> shard_pipeline_stage(const ModelFile& full, int stage, int n_stages);

/// A LoRA adapter for a model of `n_layers` layers, cut for that stage's file: the tensors of
/// its layers renamed as shard_pipeline_stage renames them, the others dropped. Errors: those of
/// shard_pipeline_stage.
Expected<LoraAdapter> stage_lora_adapter(const LoraAdapter& full, std::int64_t n_layers, int stage, int n_stages);

}  // namespace peregrine

// The driver / worker split of a model served across MPI ranks (engine/forward_mirror.h): rank
// 0's engine broadcasts each step's Batch and its KV cache's follower update (over
// MPI_COMM_WORLD: a count by MPI_Ibcast, which the workers wait for by polling — an idle
// server's workers sleep —, then one int32 message by MPI_Bcast), and every other rank's cache follows it and
// runs the same forward on its part of the model (tensor- / pipeline-parallel shard).
#pragma once

#include <cstdint>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/engine/forward_mirror.h"
#include "peregrine/engine/lora_pool.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

/// Rank 0's side: forward() and stop() broadcast to every rank of the world (collective: the
/// workers are in run_forward_worker). Call from one thread at a time (the engine's loop).
class MpiForwardMirror final : public ForwardMirror {
 public:
  void forward(const Batch& batch, const KvCache::FollowerUpdate& kv, std::span<const std::int32_t> slot_adapters) override;
  void stop() override;
};

/// A worker rank (> 0): until rank 0 stops, takes each broadcast step, makes `cache` follow its
/// update (KvCache::follow) and `lora` (null without adapters: rank 0 then sends none) its slot
/// contents (LoraPool::place), and runs model.forward over its batch (logits discarded: rank 0
/// samples). `lora` must load the same adapters as rank 0's pool, cut for this rank.
/// `cache` must have as many blocks as rank 0's (broadcast_from_first_rank). Errors: a forward's
/// (rank 0 ran the same forward without error, so this is a bug or memory trouble: the caller
/// ends the run).
Status run_forward_worker(const LlamaModel& model, KvCache& cache, ThreadPool& pool, LoraPool* lora);

/// Rank 0's `value` on every rank of the world (MPI_Bcast; collective).
std::int64_t broadcast_from_first_rank(std::int64_t value);

}  // namespace peregrine

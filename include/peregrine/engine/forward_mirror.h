// Processes that run every forward of an Engine beside it: the other ranks of a tensor- or
// pipeline-parallel model (dist/forward_mirror.h; vLLM's driver / worker split). The engine on
// rank 0 schedules; before each forward it hands the step's Batch and what its KV cache did
// since the last one (KvCache::FollowerUpdate: the sequences freed, the copy-on-write copies, the
// block tables of the batch's sequences), and each worker's cache follows it (KvCache::follow:
// the same blocks, prefix-cache hits included) before it runs the same forward on its part of
// the model. Requests naming a LoRA adapter run too: the batch's rows carry their slots, and the
// workers' LoraPools follow rank 0's slot contents (LoraPool::place). The engine refuses
// speculative decoding with a mirror (a draft's rollback is not mirrored).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/batch.h"

namespace peregrine {

class ForwardMirror {
 public:
  virtual ~ForwardMirror() = default;
  /// Before the engine's forward over `batch` (lora_slots included): its cache's update since
  /// the previous call and, with a LoraPool, the adapter each of its slots holds (-1: none;
  /// empty without LoRA).
  virtual void forward(const Batch& batch, const KvCache::FollowerUpdate& kv, std::span<const std::int32_t> slot_adapters) = 0;
  /// The engine will run no more forwards: the workers return.
  virtual void stop() = 0;
};

}  // namespace peregrine

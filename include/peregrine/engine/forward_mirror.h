// Processes that run every forward of an Engine beside it: the other ranks of a tensor- or
// pipeline-parallel model (dist/forward_mirror.h; vLLM's driver / worker split). The engine on
// rank 0 schedules; before each forward it hands the step's Batch and the KV sequences it freed
// since the last one, and each worker frees those in its own KV cache and runs the same forward
// on its part of the model. Every KV change outside the forward must therefore be a free: the
// engine refuses prefix caching, speculative decoding and LoRA adapters with a mirror.
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/model/batch.h"

namespace peregrine {

class ForwardMirror {
 public:
  virtual ~ForwardMirror() = default;
  /// Before the engine's forward over `batch`: the sequences freed since the previous call.
  virtual void forward(const Batch& batch, std::span<const std::int32_t> freed) = 0;
  /// The engine will run no more forwards: the workers return.
  virtual void stop() = 0;
};

}  // namespace peregrine

// Medusa-1 training (Cai et al. 2024): K heads on the frozen target's final hidden state, each a
// stack of ResBlocks (x + SiLU(W x + b), W and b zero at the start, so each head starts as the
// target's LM head) followed by the target's LM head, shared and frozen; head k at position t
// learns token t + k + 2 by cross-entropy on the text, weighted decay^k (0.8 in the paper). The
// hidden states come from Peregrine's forward (the residual stream after the last block, through
// the model's final RMSNorm); only the ResBlocks train (libtorch autograd, AdamW). The result is
// in the published layout (spec/medusa_heads.h). Runs in the training library
// (train/distill.h says how it loads).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/spec/medusa_heads.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/train/distill.h"

namespace peregrine::train {

struct MedusaOptions {
  std::int64_t heads = 4;        // K, in [1, 16]
  std::int64_t head_layers = 1;  // ResBlocks per head, in [0, 8]
  float decay = 0.8f;            // loss weight of head k: decay^k, in (0, 1]
  std::int64_t steps = 200, batch = 8, seq = 128, warmup = 10;
  float lr = 1e-3f;
  std::uint64_t seed = 0;
  /// Errors: kInvalidArgument naming the out-of-range field.
  Status validate() const;
};

struct MedusaReport {
  std::int64_t steps = 0;
  double first_loss = 0.0, last_loss = 0.0;  // weighted sum over heads; last: mean of the last 10
  double seconds = 0.0;
};

/// Trains Medusa heads for `target` (a dense model check_student_support covers) on windows of
/// `text` (BOS first; starts from (seed, step) as distill draws them), `target_f32` its f32 copy
/// (the final norm and LM head). Errors: kInvalidArgument (options, text shorter than seq + 1
/// tokens, seq longer than the context), kUnavailable (no training library), the forward's.
Expected<MedusaHeads> train_medusa(const LlamaModel& target, const FloatModel& target_f32, std::span<const std::int32_t> text,
                                   std::int32_t bos, const MedusaOptions& o, ThreadPool& pool, MedusaReport* report = nullptr,
                                   const DistillProgress& progress = {});

}  // namespace peregrine::train

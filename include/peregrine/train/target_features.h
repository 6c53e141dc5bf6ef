// The feature draft heads read from a frozen target: its last hidden state at every position
// AFTER its final RMSNorm, i.e. exactly what its LM head reads (Hugging Face's
// `hidden_states[-1]`, what EAGLE's eagle/ge_data scripts save and what Medusa's heads take).
// Computed by Peregrine's own forward: the residual stream after the last block, through an
// ActivationObserver, then the model's output norm with the forward's own rmsnorm kernel.
// Torch-free (in the engine library), so the training library, the tests and a runtime drafter
// get the same values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/float_model.h"

namespace peregrine::train {

/// Features f_0..f_{T−1} [T, dim] f32 row-major of `tokens` (T >= 1, one sequence at positions
/// 0..T−1, T <= the context) from one prefill forward of `target`; `target_f32` is its f32 copy
/// (output_norm.weight, plus the config's norm_weight_offset as the forward applies it).
/// Errors: kInvalidArgument (no tokens, longer than the context), the forward's (kOutOfRange for
/// a token outside the vocabulary).
Expected<std::vector<float>> target_features(const LlamaModel& target, const FloatModel& target_f32,
                                             std::span<const std::int32_t> tokens, ThreadPool& pool);

}  // namespace peregrine::train

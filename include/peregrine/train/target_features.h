// The feature draft heads read from a frozen target: its last hidden state at every position
// AFTER its final RMSNorm, i.e. exactly what its LM head reads (Hugging Face's
// `hidden_states[-1]`, what EAGLE's eagle/ge_data scripts save and what Medusa's heads take).
// Computed by Peregrine's own forward: the residual stream after the last block
// (model/final_hidden.h), then LlamaModel::output_norm, as the engine hands them to drafters.
// Torch-free (in the engine library), so the training library, the tests and a runtime drafter
// get the same values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"

namespace peregrine::train {

/// Features f_0..f_{T−1} [T, dim] f32 row-major of `tokens` (T >= 1, one sequence at positions
/// 0..T−1, T <= the context) from one prefill forward of `target`.
/// Errors: kInvalidArgument (no tokens, longer than the context), the forward's (kOutOfRange for
/// a token outside the vocabulary).
Expected<std::vector<float>> target_features(const LlamaModel& target, std::span<const std::int32_t> tokens, ThreadPool& pool);

}  // namespace peregrine::train

// The two costs that decide what speculative decoding can gain on a machine (Leviathan et al.
// 2023, §3.3–3.4): the cost of verifying k draft tokens in one target forward against decoding
// one token, and a drafter's cost per drafted token against one target decode step (c).
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/spec/drafter.h"

namespace peregrine {

/// Median seconds of one target forward of 1 + k rows (a chain: the root and k drafts, every
/// row asking for logits) after `context` cached positions, for each k of `ks` (k = 0 is plain
/// decoding). One untimed warm-up per k, then `reps` timed forwards. Random token ids.
/// Errors: kInvalidArgument (context < 1, reps < 1, a k < 0 or past the model's context) and
/// those of LlamaModel::forward.
Expected<std::vector<double>> measure_verify_seconds(const LlamaModel& model, std::int64_t context,
                                                     const std::vector<std::int32_t>& ks, std::int32_t reps,
                                                     ThreadPool& pool);

/// Median seconds per drafted token of `drafter` proposing greedy chains of k tokens for one
/// sequence of `context` random tokens (the vocabulary of `target`), the context growing by
/// one token per call as in decoding (so a model drafter feeds 1 new row + k - 1 draft rows per
/// call); a drafter that needs_features() gets random unit-variance features [*, target.dim]
/// for the new positions. One untimed warm-up call (the drafter's prefill), then `reps` timed
/// calls. Errors: kInvalidArgument (context < 1, k < 1, reps < 1), those of Drafter::draft.
Expected<double> measure_draft_seconds_per_token(Drafter& drafter, const ModelConfig& target, std::int64_t context,
                                                 std::int32_t k, std::int32_t reps, ThreadPool& pool);

}  // namespace peregrine

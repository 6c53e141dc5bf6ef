// Checks shared by every drafter on the requests of one Drafter::draft call.
#pragma once

#include <span>

#include "peregrine/core/status.h"
#include "peregrine/spec/drafter.h"

namespace peregrine {

/// Errors (kInvalidArgument, naming the sequence): empty `tokens`, max_nodes outside
/// [1, kMaxDraftNodes], branching < 1, two requests for one sequence, invalid SamplingParams.
Status validate_draft_requests(std::span<const DraftRequest> requests);

/// For drafters that draw sampled chains (DraftTreeBuilder::is_sampled_chain): errors
/// (kInvalidArgument) when such a request has no rng.
Status require_rng_for_sampled_chains(std::span<const DraftRequest> requests);

}  // namespace peregrine

// Checks shared by every drafter on the requests of one Drafter::draft call.
#pragma once

#include <span>

#include "peregrine/core/status.h"
#include "peregrine/spec/drafter.h"

namespace peregrine {

/// Errors (kInvalidArgument, naming the sequence): empty `tokens`, max_nodes outside
/// [1, kMaxDraftNodes], branching < 1, two requests for one sequence, invalid SamplingParams.
Status validate_draft_requests(std::span<const DraftRequest> requests);

}  // namespace peregrine

#include "draft_requests.h"

#include <string>
#include <unordered_set>

#include "draft_tree_builder.h"

namespace peregrine {

Status validate_draft_requests(std::span<const DraftRequest> requests) {
  std::unordered_set<std::int32_t> seqs;
  for (const DraftRequest& r : requests) {
    const std::string who = "draft request for sequence " + std::to_string(r.seq);
    if (r.tokens.empty()) return invalid_argument(who + " has no tokens (the last one is the root)");
    if (r.max_nodes < 1 || r.max_nodes > kMaxDraftNodes) {
      return invalid_argument(who + ": max_nodes must be in [1, " + std::to_string(kMaxDraftNodes) + "] (got " +
                              std::to_string(r.max_nodes) + ")");
    }
    if (r.branching < 1) return invalid_argument(who + ": branching must be >= 1 (got " + std::to_string(r.branching) + ")");
    if (!seqs.insert(r.seq).second) return invalid_argument(who + " appears twice in one draft call");
    if (r.sampling != nullptr) {
      if (Status st = r.sampling->validate(); !st.is_ok()) return invalid_argument(who + ": " + st.message());
    }
  }
  return Status::ok();
}

Status require_rng_for_sampled_chains(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests) {
    if (DraftTreeBuilder::is_sampled_chain(r) && r.rng == nullptr) {
      return invalid_argument("draft request for sequence " + std::to_string(r.seq) +
                              ": a sampled chain (temperature > 0, branching 1) needs an rng");
    }
  }
  return Status::ok();
}

}  // namespace peregrine

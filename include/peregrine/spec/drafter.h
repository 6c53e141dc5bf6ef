// The one interface every drafter implements (prompt lookup, draft model, layer skip, quantized
// self-draft, Medusa heads): given each sequence's context, propose a DraftTree per sequence; the engine
// verifies all of them in one target forward.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/draft_tree.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine {

/// One sequence's drafting job for this step.
struct DraftRequest {
  std::int32_t seq = 0;                      // the engine's KV sequence id (stable for a request)
  std::span<const std::int32_t> tokens;      // prompt + generated; tokens.back() is the root
  std::int32_t max_nodes = 1;                // node budget (>= 1)
  std::int32_t branching = 1;                // children per expanded node (1 = chain)
  const SamplingParams* sampling = nullptr;  // the request's sampling (temperature 0: greedy)
  std::mt19937_64* rng = nullptr;            // the request's draft RNG (for sampled chains)
  /// For drafters whose needs_features() is true: the target's final hidden states after its
  /// final RMSNorm (what the LM head reads; Medusa's and EAGLE's "features"), [n, dim] f32
  /// row-major, of positions [features_begin, features_begin + n): those the target computed
  /// since the previous draft() call for this sequence, in position order. The row of position
  /// tokens.size() - 2 (the one whose logits gave the root) is the last one when the target
  /// computed it since then. Empty otherwise.
  std::span<const float> features = {};
  std::int64_t features_begin = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual SpecMethod method() const = 0;
  /// The drafter reads DraftRequest::features (the engine then captures the target's final
  /// hidden states in every forward of the sequences it drafts for).
  virtual bool needs_features() const { return false; }
  /// Drafts trees[i] (resized to requests.size()) for requests[i], at most max_nodes nodes
  /// each; a tree may be empty (nothing to propose). Model drafters run every request in the
  /// same batched forwards. Drafters keep per-sequence state (e.g. their own KV cache) keyed
  /// by DraftRequest::seq and resynchronize it from `tokens` on each call, so rejected drafts
  /// need no separate rollback call. A drafter short of room (context, KV blocks) proposes
  /// fewer nodes, possibly none, rather than failing. Errors: kInvalidArgument (malformed
  /// requests) and those of the draft model's forward; the engine then decodes those
  /// sequences without drafts for this step.
  virtual Status draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees,
                       ThreadPool& pool) = 0;
  /// The sequence finished: drop its state (no-op for an unknown id).
  virtual void release(std::int32_t seq) = 0;
};

}  // namespace peregrine

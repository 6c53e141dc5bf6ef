// The engine's state of one request while it is queued or running.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "peregrine/engine/request.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/adaptive_draft.h"
#include "peregrine/spec/draft_tree.h"
#include "peregrine/spec/feature_rows.h"

namespace peregrine {

using EngineClock = std::chrono::steady_clock;

/// A request's speculative-decoding state.
struct SpecState {
  explicit SpecState(const RequestOptions& r)
      : rng(r.sampling.seed ^ 0x9e3779b97f4a7c15ull), adaptive(r.spec.draft_max) {}
  std::mt19937_64 rng;           // the drafter's draws (sampled chains), apart from the sampler's
  AdaptiveDraftLength adaptive;  // used when request.spec.adaptive
  std::int64_t budget = 0;       // draft nodes wanted this step (0: plain decode)
  DraftTree tree;                // this step's draft, verified after the forward
  /// For a drafter that needs_features(): the target's final hidden states (after its final
  /// norm) of the positions committed since the last draft() call (DraftRequest::features).
  FeatureRows features;
};

struct Sequence {
  Sequence(std::uint64_t id, std::int32_t kv_seq, RequestOptions request, RequestCallbacks callbacks)
      : id(id),
        kv_seq(kv_seq),
        n_prompt(static_cast<std::int64_t>(request.prompt.size())),
        tokens(request.prompt),
        sampler(request.sampling),
        spec(request),
        request(std::move(request)),
        callbacks(std::move(callbacks)) {
    if (this->request.grammar) grammar.emplace(this->request.grammar, this->request.eos_id);
  }

  std::uint64_t id;          // the request id Engine::submit returned
  std::int32_t kv_seq;       // sequence id in the KV cache
  std::int64_t n_prompt;     // prompt tokens
  std::vector<std::int32_t> tokens;  // prompt, then every sampled token
  std::int64_t n_computed = 0;       // positions whose K/V are in the cache (<= tokens.size())
  std::int64_t n_cached_blocks = 0;  // full blocks already offered to the prefix cache
  bool has_kv = false;               // the KV cache knows kv_seq
  bool awaiting_kv = false;          // a RemotePrefill is shipping its K/V up to tokens.size() - 1
  std::int32_t lora_slot = -1;       // the LoraPool slot pinned for request.lora_adapter once admitted
  Sampler sampler;
  std::optional<GrammarMatcher> grammar;  // when request.grammar is set
  SpecState spec;
  RequestOptions request;
  RequestCallbacks callbacks;
  RequestResult result;  // counters filled as it runs
  std::vector<float> pooled;  // an embedding request's folded hidden states (pool_rows)
  EngineClock::time_point submitted = EngineClock::now();
  EngineClock::time_point last_token{};

  /// Tokens sampled so far.
  std::int64_t n_generated() const { return static_cast<std::int64_t>(tokens.size()) - n_prompt; }
  /// Tokens whose K/V still have to be computed before the next token can be sampled.
  std::int64_t n_pending() const { return static_cast<std::int64_t>(tokens.size()) - n_computed; }
};

}  // namespace peregrine

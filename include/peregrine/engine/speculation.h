// Speculative decoding inside the engine's step loop (Leviathan et al. 2023; Chen et al. 2023;
// SpecInfer, Miao et al. 2024): before the step's one target forward, every decoding sequence
// that asked for speculation gets a draft tree from its drafter (one batched draft() call per
// drafter); the trees ride in the same ragged Batch as the decode roots (tree attention rows)
// and the prefill chunks; after the forward each tree is verified, the KV of the accepted path
// is kept (KvCache::compact) and the rest rolled back.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/engine/scheduler.h"
#include "peregrine/engine/sequence.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/batch.h"
#include "peregrine/spec/drafter.h"
#include "peregrine/spec/forward_cost_model.h"

namespace peregrine {

/// A token to emit and the index of its logits row among its sequence's verification rows
/// (0: the root's row; 1 + i: draft node i's row), for logprobs.
struct SpecToken {
  std::int32_t token = -1;
  std::int64_t row = 0;
};

class Speculation {
 public:
  /// Prompt lookup (kPld) is built in; `model_drafter` (may be null; must outlive this) serves
  /// the requests whose method equals its method().
  explicit Speculation(Drafter* model_drafter);
  ~Speculation();

  /// Errors: kInvalidArgument when `p` is invalid or its method needs a drafter this engine
  /// was not started with (the message names the one it has).
  Status check(const SpecParams& p) const;

  /// Sets spec.budget (draft nodes wanted this step) of every running sequence about to
  /// decode: the request's draft_max (or the adaptive length), capped so the step cannot emit
  /// more than max_tokens nor write past `ctx_len` positions; 0 for plain decoding.
  void plan(const std::vector<std::unique_ptr<Sequence>>& running, std::int64_t ctx_len) const;

  /// Drafts spec.tree for every chunk with n_draft > 0 (at most n_draft nodes), one batched
  /// draft() per drafter; clears the trees of the others. A drafter error leaves its trees
  /// empty (those sequences decode plainly this step). The kept features of the sequences
  /// drafted for are handed over (DraftRequest::features) and dropped.
  void draft(const std::vector<ScheduledChunk>& chunks, ThreadPool& pool);

  /// Some chunk's sequence drafts with a drafter that needs_features(): the step's forward
  /// must capture the target's final hidden states (FinalHiddenCapture).
  bool needs_features(const std::vector<ScheduledChunk>& chunks) const;

  /// Keeps, for the next draft() of `seq` (when its drafter needs_features(); a no-op
  /// otherwise), `rows` [n, dim] f32: the target's final hidden states after its final norm
  /// of positions first_position .. first_position + n - 1, now committed to its context. A
  /// position at or before one already kept (a recomputation after preemption) drops the kept
  /// rows from there on; a gap drops all of them.
  void keep_features(Sequence& seq, std::int64_t first_position, std::span<const float> rows, std::int64_t dim) const;

  /// Appends a decode chunk's root row (its pending token) and its draft tree's rows (token
  /// tree rows of Batch::parents; a chain as plain rows), every row asking for logits.
  static void add_rows(const Sequence& seq, Batch& batch);

  /// After the forward and Scheduler::commit: verifies seq.spec.tree against `logits` (the
  /// sequence's 1 + tree.size() rows, [rows, vocab] f32), keeps the accepted path's KV through
  /// `scheduler` (Scheduler::keep_accepted: positions n_computed .. n_computed + path - 1), advances
  /// seq.n_computed over it, and updates the request's counters and adaptive length. Returns
  /// the accepted tokens then the correction / bonus token, in order. `features`, when not
  /// empty, holds the final hidden states (after the final norm) of the same rows, [rows, dim]
  /// f32: those of the root and the accepted path are kept (keep_features). Errors: those of
  /// verify_draft (a malformed tree: a drafter bug; the KV cache is left as the forward wrote it).
  Expected<std::vector<SpecToken>> verify(Sequence& seq, std::span<const float> logits, std::int64_t vocab,
                                          Scheduler& scheduler, std::span<const float> features = {});

  /// A target forward of `rows` batch rows took `seconds` (every step: the adaptive length's
  /// cost model).
  void observe_forward(std::int64_t rows, double seconds);

  /// The request ended or was preempted: drop its drafter state.
  void release(const Sequence& seq);

 private:
  Drafter* drafter_for(SpecMethod m) const;

  std::unique_ptr<Drafter> pld_;
  Drafter* model_drafter_;
  /// c for the adaptive length: (draft seconds per token + verify seconds per extra row) /
  /// seconds of a one-row step (0 until measured).
  double draft_cost(SpecMethod m) const;

  std::map<SpecMethod, double> draft_seconds_per_node_;  // EMA per drafter
  ForwardCostModel forward_cost_;
};

}  // namespace peregrine

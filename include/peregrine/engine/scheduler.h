// Iteration-level scheduling (Orca, Yu et al. 2022) with chunked prefill (Sarathi, Agrawal et
// al. 2024) over the paged KV cache (vLLM, Kwon et al. 2023): decides, each step, which
// sequences compute how many tokens under a token budget, admits waiting requests FCFS,
// reserves their KV blocks (reusing prefix-cache blocks), and preempts by recomputation when
// blocks run out.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "peregrine/engine/lora_pool.h"
#include "peregrine/engine/remote_prefill.h"
#include "peregrine/engine/sequence.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/kv/prefix_cache.h"
#include "peregrine/model/batch.h"

namespace peregrine {

struct SchedulerLimits {
  std::int64_t max_batch_tokens = 256;  // rows of one step's Batch
  std::int32_t max_running = 16;        // sequences holding KV at once
  /// Prompt tokens a step that also decodes may carry; 0 = up to max_batch_tokens. Stall-free
  /// batching (Sarathi-Serve, Agrawal et al. 2024): a prompt chunk beside running decodes
  /// lengthens that step, i.e. every decoding stream's inter-token latency, by its compute;
  /// a small budget keeps such a step near a decode step's time (lower ITL p99), a large one
  /// admits prompts faster (lower TTFT). A step without decodes is not capped by it.
  std::int64_t prefill_budget = 0;
  /// With prefill_budget > 0: the rows a step that also decodes may hold in all, decodes (and
  /// their draft rows) included — Sarathi-Serve's token budget —, its prompt tokens being
  /// max(prefill_budget, step_budget − decode rows). With few decodes a step carries more of the
  /// waiting prompts at about the same step time (their time to first token falls), with many
  /// it still carries prefill_budget (no prompt starves). 0: prefill_budget alone.
  std::int64_t step_budget = 0;
  /// Keeps every KV block of the sliding-window layer groups (llama.cpp's --swa-full); by
  /// default commit() releases the blocks that left their window (KvCache::release_behind_window).
  bool swa_full = false;
};

/// One sequence's share of a step: compute tokens [seq->n_computed, + n_tokens), plus
/// n_draft draft-tree rows after a decode token (speculative verification; their KV slots are
/// reserved too, the accepted ones are kept after verification).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  std::int64_t n_tokens = 0;
  std::int64_t n_draft = 0;
};

class Scheduler {
 public:
  /// `prefix_cache` may be null (prefix caching off), `lora` too (requests without adapters),
  /// `remote` too (prompts prefilled here). All must outlive the scheduler.
  Scheduler(const SchedulerLimits& limits, KvCache& cache, PrefixCache* prefix_cache, LoraPool* lora = nullptr,
            RemotePrefill* remote = nullptr);

  /// Appends a new request to the waiting queue (FCFS).
  void enqueue(std::unique_ptr<Sequence> seq);

  /// Plans one step, in this order: every running sequence in decode (1 token each, oldest
  /// first, plus up to seq->spec.budget draft rows when blocks are free without preempting
  /// anyone and the token budget allows), running prefills (chunks; when the step decodes,
  /// at most max(limits.prefill_budget, limits.step_budget − decode rows) prompt tokens in all), then waiting requests in FCFS order while there are
  /// running slots, budget and blocks (a request that does not fit blocks the ones behind it);
  /// one naming a LoRA adapter also needs a LoraPool slot, pinned from admission until
  /// remove() (without one it is passed over and stays queued; if its adapter fails to load
  /// it goes to failed()); so is one whose RequestOptions::prefill_from request is queued or
  /// has not computed its prompt yet (then it forks that request's K/V). KV blocks for every
  /// planned chunk are reserved here; when the pool runs dry the
  /// prefix cache evicts, and then the most recently admitted running sequence is preempted
  /// (its KV freed, its tokens kept; it goes back to the front of the queue and is
  /// recomputed later). The returned chunks are ordered like the Batch rows to build.
  /// With a RemotePrefill, an admitted request whose tokens but the last are not all in the
  /// cache reserves blocks for them and asks the remote for their K/V instead of taking a
  /// chunk (it is then awaiting_kv: never scheduled nor preempted); the rows that arrived are
  /// written first, and a request whose K/V are complete decodes from its last prompt token
  /// (a remote error sends it to failed()).
  std::vector<ScheduledChunk> schedule();

  /// Plans the KV of the step's batch (the rows of the chunks schedule() returned, drafts
  /// included): plan_batch_kv on this scheduler's cache, whose blocks schedule() reserved, so
  /// the forward only writes rows. The only place the engine's block tables and lengths change
  /// besides schedule(), commit(), keep_accepted(), discard_drafts() and remove(). Errors: those
  /// of plan_batch_kv.
  Status plan_kv(Batch& batch);

  /// Marks chunks as computed (n_computed advances), offers newly completed full blocks
  /// to the prefix cache, then (unless limits.swa_full) releases the sliding-window blocks
  /// no later position sees (KvCache::release_behind_window).
  void commit(const std::vector<ScheduledChunk>& chunks);

  /// After verification: keeps the K/V of the accepted draft rows, whose slots are `from`
  /// (ascending), at positions seq.n_computed, + 1, ... and drops the other draft rows
  /// (KvCache::compact). Call before advancing seq.n_computed over them.
  void keep_accepted(const Sequence& seq, std::span<const std::int64_t> from);

  /// Drops the KV slots past seq.n_computed (draft rows a plain decode did not use).
  void discard_drafts(const Sequence& seq);

  /// Removes a finished (or cancelled) sequence from wherever it is, offering its full
  /// blocks to the prefix cache and freeing its KV. Returns ownership.
  std::unique_ptr<Sequence> remove(Sequence* seq);

  /// Sequences with KV (admission order) and waiting ones (queue order).
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  std::int64_t preemptions() const { return preemptions_; }
  /// Whether a running sequence waits for its K/V from the RemotePrefill.
  bool awaiting_remote() const;
  /// Running sequences the last schedule() could not give a block although nothing else was
  /// left to preempt: the pool cannot hold them; the engine ends them (finish reason length).
  const std::vector<Sequence*>& stuck() const { return stuck_; }
  /// Waiting requests the last schedule() could not admit because their adapter failed to
  /// load, with the loader's error; the engine ends them.
  const std::vector<std::pair<Sequence*, Status>>& failed() const { return failed_; }

 private:
  bool reserve(Sequence& seq, std::int64_t n_tokens, bool may_preempt);
  std::int64_t reserve_decode(Sequence& seq, std::int64_t budget);
  void attach_cached_prefix(Sequence& seq);
  const Sequence* prefill_parent(const Sequence& seq, bool& wait) const;
  void fork_prompt(const Sequence& parent, Sequence& seq);
  bool is_running(const Sequence* seq) const;
  void preempt(std::size_t running_index);
  void offer_blocks(Sequence& seq);
  bool pin_adapter(Sequence& seq);
  void receive_remote_kv();
  bool admit_remote(Sequence& seq);

  SchedulerLimits limits_;
  KvCache& cache_;
  PrefixCache* prefix_cache_;
  LoraPool* lora_;
  RemotePrefill* remote_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::unordered_set<const Sequence*> scheduled_;  // sequences with a chunk in this step
  std::vector<Sequence*> stuck_;
  std::vector<std::pair<Sequence*, Status>> failed_;
  std::int64_t preemptions_ = 0;
};

}  // namespace peregrine

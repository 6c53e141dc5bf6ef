#include "peregrine/engine/scheduler.h"

#include <algorithm>

#include "peregrine/model/batch_kv_plan.h"

namespace peregrine {

Scheduler::Scheduler(const SchedulerLimits& limits, KvCache& cache, PrefixCache* prefix_cache, LoraPool* lora,
                     RemotePrefill* remote)
    : limits_(limits), cache_(cache), prefix_cache_(prefix_cache), lora_(lora), remote_(remote) {}

void Scheduler::enqueue(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

void Scheduler::offer_blocks(Sequence& seq) {
  if (prefix_cache_ == nullptr || !seq.has_kv) return;
  const std::int64_t full = seq.n_computed / cache_.block_size();
  if (full <= seq.n_cached_blocks) return;
  const auto n_tokens = static_cast<std::size_t>(full * cache_.block_size());
  prefix_cache_->insert(std::span(seq.tokens).first(n_tokens), cache_.blocks_by_position(seq.kv_seq), seq.request.lora_adapter);
  seq.n_cached_blocks = full;
}

void Scheduler::preempt(std::size_t running_index) {
  std::unique_ptr<Sequence> seq = std::move(running_[running_index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  offer_blocks(*seq);  // its blocks stay reusable until evicted
  cache_.free_sequence(seq->kv_seq);
  seq->has_kv = false;
  seq->n_computed = 0;
  seq->n_cached_blocks = 0;
  seq->pooled.clear();  // an embedding request pools its recomputed rows again
  ++seq->result.preemptions;
  ++preemptions_;
  waiting_.push_front(std::move(seq));
}

// Reserves KV for `n_tokens` more positions of `seq`, evicting prefix-cache blocks and then
// preempting running sequences that have no chunk in this step (newest first), never `seq`.
bool Scheduler::reserve(Sequence& seq, std::int64_t n_tokens, bool may_preempt) {
  const std::int64_t target = seq.n_computed + n_tokens;
  for (;;) {
    if (cache_.reserve(seq.kv_seq, target).is_ok()) return true;
    const std::int64_t short_by = cache_.blocks_needed(seq.kv_seq, target) - cache_.pool().n_free();
    if (prefix_cache_ != nullptr && prefix_cache_->evict(short_by) > 0) continue;
    if (!may_preempt) return false;  // admissions never preempt running sequences
    std::size_t victim = running_.size();
    for (std::size_t i = running_.size(); i-- > 0;) {
      if (running_[i].get() != &seq && !scheduled_.contains(running_[i].get()) && !running_[i]->awaiting_kv) {
        victim = i;
        break;
      }
    }
    if (victim == running_.size()) return false;
    preempt(victim);
  }
}

// A decode token plus as many of the wanted draft rows as fit in the token budget and in the
// blocks free without preempting (speculation never evicts another request); -1 when not even
// the decode token gets a block. Returns the draft rows reserved.
std::int64_t Scheduler::reserve_decode(Sequence& seq, std::int64_t budget) {
  const std::int64_t n_draft = std::min(seq.spec.budget, budget - 1);
  if (n_draft > 0 && reserve(seq, 1 + n_draft, false)) return n_draft;
  return reserve(seq, 1, true) ? 0 : -1;
}

void Scheduler::attach_cached_prefix(Sequence& seq) {
  if (prefix_cache_ != nullptr && seq.request.pooling == Pooling::kNone) {  // embeddings pool every position
    const std::int64_t max_blocks = (static_cast<std::int64_t>(seq.tokens.size()) - 1) / cache_.block_size();
    const std::vector<std::int32_t> blocks = prefix_cache_->match(seq.tokens, max_blocks, seq.request.lora_adapter);
    const auto n_hit_blocks = static_cast<std::int64_t>(blocks.size()) / cache_.n_groups();  // position-major
    const std::int64_t n_hit = n_hit_blocks * cache_.block_size();
    cache_.attach_prefix(seq.kv_seq, blocks, n_hit);
    seq.n_computed = n_hit;
    seq.n_cached_blocks = n_hit_blocks;
    seq.result.cached_prompt_tokens = std::min(n_hit, seq.n_prompt);
  }
  seq.has_kv = true;
}

// The running request whose prompt K/V `seq` shares (RequestOptions::prefill_from), once it has
// computed them up to the last prompt token; null when `seq` computes its own (no such request,
// a different prompt or adapter, a one-token prompt, or sliding-window groups: a window group
// may have released blocks the fork's last prompt token still sees). `wait`: the request is
// queued or still prefilling.
const Sequence* Scheduler::prefill_parent(const Sequence& seq, bool& wait) const {
  wait = false;
  const std::uint64_t from = seq.request.prefill_from;
  if (from == 0 || seq.n_prompt < 2 || seq.request.pooling != Pooling::kNone || (cache_.n_groups() > 1 && !limits_.swa_full)) {
    return nullptr;
  }
  const auto is_parent = [from](const auto& p) { return p->id == from; };
  if (std::any_of(waiting_.begin(), waiting_.end(), is_parent)) {
    wait = true;
    return nullptr;
  }
  const auto it = std::find_if(running_.begin(), running_.end(), is_parent);
  if (it == running_.end()) return nullptr;
  const Sequence& parent = **it;
  const auto shared = static_cast<std::size_t>(seq.n_prompt - 1);
  if (parent.awaiting_kv || parent.request.lora_adapter != seq.request.lora_adapter || parent.tokens.size() < shared ||
      !std::equal(seq.tokens.begin(), seq.tokens.begin() + static_cast<std::ptrdiff_t>(shared), parent.tokens.begin())) {
    return nullptr;
  }
  wait = parent.n_computed < seq.n_prompt - 1;
  return wait ? nullptr : &parent;
}

// Starts `seq` on `parent`'s K/V of its prompt but the last token (shared blocks; the last
// token's partial block is copied when `seq` reserves it).
void Scheduler::fork_prompt(const Sequence& parent, Sequence& seq) {
  cache_.fork(parent.kv_seq, seq.kv_seq);
  cache_.truncate(seq.kv_seq, seq.n_prompt - 1);
  seq.n_computed = seq.n_prompt - 1;
  seq.n_cached_blocks = std::min(parent.n_cached_blocks, seq.n_computed / cache_.block_size());
  seq.result.cached_prompt_tokens = seq.n_computed;
  seq.has_kv = true;
}

// Pins a LoraPool slot for the adapter `seq` names (kept while it waits again after a
// preemption); false when every slot is pinned by other adapters or the adapter failed to load
// (then `seq` goes to failed_).
bool Scheduler::pin_adapter(Sequence& seq) {
  if (seq.request.lora_adapter < 0 || seq.lora_slot >= 0) return true;
  if (lora_ == nullptr) {
    failed_.emplace_back(&seq, invalid_argument("the engine serves no LoRA adapters"));
    return false;
  }
  auto slot = lora_->acquire(seq.request.lora_adapter);
  if (!slot) {
    failed_.emplace_back(&seq, slot.status());
    return false;
  }
  if (!*slot) return false;
  seq.lora_slot = **slot;
  return true;
}

// Marks the sequences whose K/V the remote prefill completed (their last token is left to
// compute here) or failed.
void Scheduler::receive_remote_kv() {
  if (remote_ == nullptr) return;
  for (auto& [id, status] : remote_->poll(cache_)) {
    const auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p->id == id && p->awaiting_kv; });
    if (it == running_.end()) continue;
    Sequence& seq = **it;
    if (!status) {  // stays awaiting_kv (never planned) until the engine ends it
      failed_.emplace_back(&seq, std::move(status));
      continue;
    }
    seq.awaiting_kv = false;
    seq.n_computed = static_cast<std::int64_t>(seq.tokens.size()) - 1;
    offer_blocks(seq);
  }
}

// Admits `seq` (its cached prefix attached) with its K/V up to the last token from the remote
// prefill: false when their blocks are not free.
bool Scheduler::admit_remote(Sequence& seq) {
  const std::int64_t n = static_cast<std::int64_t>(seq.tokens.size()) - 1 - seq.n_computed;
  if (!reserve(seq, n, false)) return false;
  remote_->request(seq.id, seq.kv_seq, std::span(seq.tokens).first(seq.tokens.size() - 1), seq.n_computed);
  seq.awaiting_kv = true;
  return true;
}

bool Scheduler::awaiting_remote() const {
  return std::any_of(running_.begin(), running_.end(), [](const auto& p) { return p->awaiting_kv; });
}

bool Scheduler::is_running(const Sequence* seq) const {
  return std::any_of(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == seq; });
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> chunks;
  scheduled_.clear();
  stuck_.clear();
  failed_.clear();
  receive_remote_kv();
  std::int64_t budget = limits_.max_batch_tokens;
  auto plan = [&](Sequence& seq, std::int64_t n, std::int64_t n_draft) {
    chunks.push_back({&seq, n, n_draft});
    scheduled_.insert(&seq);
    budget -= n + n_draft;
  };
  // Running sequences: decodes first (they wait on one token each), then prefill chunks.
  // Reserving may preempt others, so iterate over a snapshot and skip the preempted.
  for (const bool decode : {true, false}) {
    if (!decode && !chunks.empty() && limits_.prefill_budget > 0) {
      const auto decode_rows = limits_.max_batch_tokens - budget;  // decode tokens + draft rows
      budget = std::min(budget, std::max(limits_.prefill_budget, limits_.step_budget - decode_rows));
    }
    std::vector<Sequence*> order;
    for (const auto& p : running_) order.push_back(p.get());
    for (Sequence* seq : order) {
      if (budget == 0) break;
      if (scheduled_.contains(seq) || seq->awaiting_kv || (seq->n_pending() == 1) != decode || !is_running(seq)) continue;
      if (decode) {
        if (const std::int64_t n_draft = reserve_decode(*seq, budget); n_draft >= 0) {
          plan(*seq, 1, n_draft);
          continue;
        }
      } else if (const std::int64_t n = std::min(seq->n_pending(), budget); reserve(*seq, n, true)) {
        plan(*seq, n, 0);
        continue;
      }
      if (scheduled_.empty() && !awaiting_remote()) {
        stuck_.push_back(seq);  // nothing left to preempt: the pool cannot hold it
      }  // (K/V on their way from a remote prefill: that sequence is preemptible once they land)
    }
  }
  // Waiting requests, FCFS: admission stops at the first one that does not fit, except that a
  // request whose LoRA adapter finds no free slot is passed over (as vLLM's scheduler does
  // at its max_loras), so the base and resident adapters keep running meanwhile, and so is one
  // waiting for the prompt K/V of the request it shares them with.
  for (std::size_t i = 0; i < waiting_.size() && budget > 0 && static_cast<std::int32_t>(running_.size()) < limits_.max_running;) {
    Sequence& seq = *waiting_[i];
    bool wait_for_parent = false;
    const Sequence* parent = prefill_parent(seq, wait_for_parent);
    if (wait_for_parent) {
      ++i;
      continue;
    }
    const auto n_tokens = parent != nullptr ? 1 : static_cast<std::int64_t>(seq.tokens.size());
    // Remote prefill reserves the whole prompt at once (its K/V arrive without a chunk here).
    const std::int64_t worst =
        cache_.n_groups() * blocks_for_tokens(remote_ != nullptr ? n_tokens : std::min(n_tokens, budget), cache_.block_size());
    const std::int64_t available = cache_.pool().n_free() + (prefix_cache_ ? prefix_cache_->n_evictable_blocks() : 0);
    if (worst > available) break;
    if (!pin_adapter(seq)) {
      ++i;
      continue;
    }
    parent != nullptr ? fork_prompt(*parent, seq) : attach_cached_prefix(seq);
    const bool remote = remote_ != nullptr && seq.n_pending() > 1;
    const std::int64_t n = std::min(seq.n_pending(), budget);
    if (remote ? !admit_remote(seq) : !reserve(seq, n, false)) {
      cache_.free_sequence(seq.kv_seq);
      seq.has_kv = false;
      seq.n_computed = seq.n_cached_blocks = seq.result.cached_prompt_tokens = 0;
      break;
    }
    running_.push_back(std::move(waiting_[i]));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (!remote) plan(seq, n, 0);
  }
  return chunks;
}

Status Scheduler::plan_kv(Batch& batch) { return plan_batch_kv(batch, cache_); }

void Scheduler::keep_accepted(const Sequence& seq, std::span<const std::int64_t> from) {
  cache_.compact(seq.kv_seq, seq.n_computed, from);
}

void Scheduler::discard_drafts(const Sequence& seq) { cache_.truncate(seq.kv_seq, seq.n_computed); }

void Scheduler::commit(const std::vector<ScheduledChunk>& chunks) {
  for (const ScheduledChunk& c : chunks) {
    c.seq->n_computed += c.n_tokens;
    offer_blocks(*c.seq);  // before a window releases blocks: the prefix cache keeps them
    if (!limits_.swa_full) cache_.release_behind_window(c.seq->kv_seq, c.seq->n_computed);
  }
}

std::unique_ptr<Sequence> Scheduler::remove(Sequence* seq) {
  std::unique_ptr<Sequence> out;
  if (auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == seq; });
      it != running_.end()) {
    out = std::move(*it);
    running_.erase(it);
  } else if (auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& p) { return p.get() == seq; });
             w != waiting_.end()) {
    out = std::move(*w);
    waiting_.erase(w);
  }
  if (out && out->awaiting_kv) {
    remote_->cancel(out->id);
    out->awaiting_kv = false;
  }
  if (out && out->has_kv) {
    offer_blocks(*out);
    cache_.free_sequence(out->kv_seq);
    out->has_kv = false;
  }
  if (out && out->lora_slot >= 0) {
    lora_->release(out->lora_slot);
    out->lora_slot = -1;
  }
  return out;
}

}  // namespace peregrine

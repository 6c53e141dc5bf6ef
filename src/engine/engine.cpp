#include "peregrine/engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "peregrine/engine/scheduler.h"
#include "peregrine/engine/speculation.h"
#include "peregrine/kv/prefix_cache.h"
#include "peregrine/model/final_hidden.h"
#include "peregrine/sampling/logprobs.h"

namespace peregrine {
namespace {

double seconds_between(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Status validate_options(const LlamaModel& model, const EngineOptions& o) {
  if (o.max_batch_tokens < 1) return invalid_argument("max batch tokens must be >= 1");
  if (o.prefill_budget < 0) return invalid_argument("the prefill budget must be >= 0");
  if (o.step_budget < 0) return invalid_argument("the step budget must be >= 0");
  if (o.max_running < 1) return invalid_argument("the number of parallel sequences must be >= 1");
  if (o.max_waiting < 0) return invalid_argument("the queue size must be >= 0");
  if (o.ctx_len < 0 || o.ctx_len > model.config().max_seq_len) {
    return invalid_argument("context length must be in [1, " + std::to_string(model.config().max_seq_len) + "]");
  }
  if (o.mirror != nullptr && o.drafter != nullptr) {
    return invalid_argument("an engine mirrored by other processes runs without drafters");
  }
  if (o.remote_prefill != nullptr && (o.mirror != nullptr || o.drafter != nullptr || o.lora != nullptr)) {
    return invalid_argument("a decode instance with a remote prefill runs without a mirror, drafters or LoRA adapters");
  }
  return Status::ok();
}

/// Prompt and generated tokens per second over a sliding window of recent steps.
class TokenRate {
 public:
  void add(EngineClock::time_point t, std::int64_t prompt, std::int64_t generated) {
    steps_.push_back({t, prompt, generated});
    while (!steps_.empty() && seconds_between(steps_.front().t, t) > kWindowSeconds) steps_.pop_front();
  }
  /// (prompt tokens/s, generated tokens/s) over the window ending at `now`.
  std::pair<double, double> rates(EngineClock::time_point now) const {
    std::int64_t p = 0, g = 0;
    for (const Step& s : steps_) {
      if (seconds_between(s.t, now) <= kWindowSeconds) p += s.prompt, g += s.generated;
    }
    return {static_cast<double>(p) / kWindowSeconds, static_cast<double>(g) / kWindowSeconds};
  }

 private:
  static constexpr double kWindowSeconds = 10.0;
  struct Step {
    EngineClock::time_point t;
    std::int64_t prompt, generated;
  };
  std::deque<Step> steps_;
};

}  // namespace

struct Engine::Impl {
  Impl(const LlamaModel& m, const EngineOptions& o, ThreadPool& p, KvCache c)
      : model(m), options(o), pool(p), cache(std::move(c)), prefix(cache),
        scheduler({o.max_batch_tokens, o.max_running, o.prefill_budget, o.step_budget, o.swa_full}, cache, o.prefix_caching ? &prefix : nullptr, o.lora,
                  o.remote_prefill),
        speculation(o.drafter),
        ctx_len(o.ctx_len > 0 ? o.ctx_len : m.config().max_seq_len) {}

  const LlamaModel& model;
  EngineOptions options;
  ThreadPool& pool;
  KvCache cache;
  PrefixCache prefix;
  Scheduler scheduler;  // step-loop state: only touched by the thread running step()
  Speculation speculation;
  std::int64_t ctx_len;
  std::vector<float> logits;
  std::vector<float> features;  // the step's final hidden states after the final norm, when captured
  Batch batch;
  TokenRate rate;

  // Shared with submitting / cancelling / observing threads, under `mu`.
  mutable std::mutex mu;
  std::condition_variable wake;
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::vector<std::uint64_t> cancels;
  std::int64_t n_running = 0, n_waiting = 0;  // as of the last step
  std::int64_t n_unfinished = 0;              // submitted, on_finish not yet called
  std::uint64_t next_id = 1;
  std::int32_t next_kv_seq = 0;
  bool accepting = true;
  bool stop_loop = false;
  bool shut_down = false;
  std::thread thread;
  EngineMetrics metrics;

  Status check_request(const RequestOptions& r) const;
  void take_incoming();
  Sequence* find(std::uint64_t id) const;
  void finish(Sequence* seq, FinishReason reason, Status error = Status::ok());
  void build_batch(const std::vector<ScheduledChunk>& chunks);
  bool emit(Sequence& seq, std::int32_t token, std::span<const float> raw, double gap_s, std::int64_t& generated);
  void sample(Sequence& seq, std::span<float> row, std::int64_t& generated);
  void verify(Sequence& seq, std::span<float> rows, std::span<const float> row_features, std::int64_t& generated);
  Status mask_draft_rows(Sequence& seq, std::span<float> rows);
  Status run_forward(const std::vector<ScheduledChunk>& chunks);
  void record_step(std::int64_t prompt_tokens, std::int64_t generated);
  void finish_embedding(Sequence& seq);
  bool idle() const;
  bool step();
  void loop();
  void fail_all(const Status& error);
};

Status Engine::Impl::check_request(const RequestOptions& r) const {
  PEREGRINE_RETURN_IF_ERROR(r.sampling.validate());
  PEREGRINE_RETURN_IF_ERROR(speculation.check(r.spec));
  if (model.on_cuda() && (r.spec.method != SpecMethod::kNone || r.lora_adapter >= 0)) {
    return invalid_argument("speculative decoding and LoRA adapters do not run on a CUDA model yet");
  }
  if ((options.mirror != nullptr || options.remote_prefill != nullptr) && r.spec.method != SpecMethod::kNone) {
    return invalid_argument("speculative decoding does not run on a model split across processes (--tp / --pp / --role) yet");
  }
  if (r.pooling != Pooling::kNone && (model.on_cuda() || options.mirror != nullptr || options.remote_prefill != nullptr)) {
    return invalid_argument("embeddings do not run on a CUDA model or a model split across processes yet");
  }
  if (r.prompt.empty()) return invalid_argument("the prompt is empty");
  if (r.max_tokens < 1) return invalid_argument("max_tokens must be >= 1 (got " + std::to_string(r.max_tokens) + ")");
  if (r.top_logprobs > 20) return invalid_argument("top_logprobs must be <= 20");
  const std::int32_t n_adapters = options.lora != nullptr ? options.lora->n_adapters() : 0;
  if (r.lora_adapter < -1 || r.lora_adapter >= n_adapters) {
    return invalid_argument("LoRA adapter " + std::to_string(r.lora_adapter) + " is not one of the engine's " +
                            std::to_string(n_adapters));
  }
  for (std::int32_t t : r.prompt) {
    if (t < 0 || t >= model.config().vocab_size) {
      return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  const auto n = static_cast<std::int64_t>(r.prompt.size());
  if (n > ctx_len) {
    return out_of_range("the prompt is " + std::to_string(n) + " tokens, which exceeds the available context size of " +
                        std::to_string(ctx_len) + " tokens");
  }
  if (cache.n_groups() * blocks_for_tokens(n + 1, cache.block_size()) > cache.pool().n_blocks()) {
    return out_of_range("the prompt needs more KV blocks than the whole KV cache holds (" +
                        std::to_string(cache.pool().n_blocks() / cache.n_groups()) + " blocks of " +
                        std::to_string(cache.block_size()) + " tokens)");
  }
  return Status::ok();
}

void Engine::Impl::take_incoming() {
  std::vector<std::unique_ptr<Sequence>> fresh;
  std::vector<std::uint64_t> cancelled;
  {
    std::lock_guard lock(mu);
    fresh.swap(incoming);
    cancelled.swap(cancels);
  }
  for (auto& seq : fresh) scheduler.enqueue(std::move(seq));
  for (std::uint64_t id : cancelled) {
    if (Sequence* seq = find(id)) finish(seq, FinishReason::kCancelled);
  }
}

Sequence* Engine::Impl::find(std::uint64_t id) const {
  for (const auto& s : scheduler.running()) if (s->id == id) return s.get();
  for (const auto& s : scheduler.waiting()) if (s->id == id) return s.get();
  return nullptr;
}

void Engine::Impl::finish(Sequence* seq, FinishReason reason, Status error) {
  std::unique_ptr<Sequence> done = scheduler.remove(seq);  // frees its KV blocks
  speculation.release(*done);
  RequestResult& r = done->result;
  r.reason = reason;
  r.error = std::move(error);
  r.prompt_tokens = done->n_prompt;
  r.completion_tokens = done->n_generated();
  r.e2e_ms = 1000.0 * seconds_between(done->submitted, EngineClock::now());
  {
    std::lock_guard lock(mu);
    ++metrics.requests_by_status[finish_reason_name(reason)];
    --n_unfinished;
    metrics.e2e.observe(r.e2e_ms / 1000.0);
    metrics.spec_draft_tokens_total += r.spec_drafted;
    metrics.spec_accepted_tokens_total += r.spec_accepted;
    metrics.spec_steps_total += r.spec_steps;
  }
  if (done->callbacks.on_finish) done->callbacks.on_finish(r);
}

// An embedding request whose prompt is computed: its pooled vector in the result, finished.
void Engine::Impl::finish_embedding(Sequence& seq) {
  seq.result.embedding = pooled_embedding(seq.request.pooling, std::move(seq.pooled), seq.n_prompt);
  finish(&seq, FinishReason::kStop);
}

void Engine::Impl::build_batch(const std::vector<ScheduledChunk>& chunks) {
  batch.clear();
  const bool lora = std::any_of(chunks.begin(), chunks.end(), [](const ScheduledChunk& c) { return c.seq->lora_slot >= 0; });
  for (const ScheduledChunk& c : chunks) {
    const Sequence& s = *c.seq;
    const std::int64_t first_row = batch.size();
    if (c.n_draft > 0) {
      Speculation::add_rows(s, batch);
    } else {
      const std::int64_t end = s.n_computed + c.n_tokens;
      for (std::int64_t p = s.n_computed; p < end; ++p) {
        const bool last = p + 1 == end && end == static_cast<std::int64_t>(s.tokens.size()) && s.request.pooling == Pooling::kNone;
        batch.add(s.tokens[static_cast<std::size_t>(p)], static_cast<std::int32_t>(p), s.kv_seq, last);
      }
    }
    if (lora) batch.lora_slots.insert(batch.lora_slots.end(), static_cast<std::size_t>(batch.size() - first_row), s.lora_slot);
  }
}

// Reports one generated token of `seq` (logprobs from `raw`, its unmodified logits row, when
// asked; `gap_s` is its inter-token latency) and ends the request on EOS, max_tokens, a full
// context, or when the client asks to stop. Returns false when the request ended.
bool Engine::Impl::emit(Sequence& seq, std::int32_t token, std::span<const float> raw, double gap_s,
                        std::int64_t& generated) {
  {
    std::lock_guard lock(mu);
    if (seq.n_generated() == 0) {
      seq.result.ttft_ms = 1000.0 * seconds_between(seq.submitted, EngineClock::now());
      metrics.ttft.observe(seq.result.ttft_ms / 1000.0);
    } else {
      metrics.itl.observe(gap_s);
    }
  }
  ++generated;
  if (token == seq.request.eos_id && !seq.request.ignore_eos) {
    finish(&seq, FinishReason::kStop);
    return false;
  }
  TokenEvent event;
  event.token = token;
  if (seq.request.top_logprobs >= 0) {
    auto [logprob, top] = token_logprobs(raw, token, seq.request.top_logprobs);
    event.logprob = logprob;
    event.top_logprobs = std::move(top);
  }
  seq.tokens.push_back(token);
  if (seq.callbacks.on_token && !seq.callbacks.on_token(event)) {
    finish(&seq, FinishReason::kStop);
    return false;
  }
  // The context holds positions [0, ctx_len): the newest token needs position tokens.size() - 1.
  if (seq.n_generated() >= seq.request.max_tokens || static_cast<std::int64_t>(seq.tokens.size()) > ctx_len) {
    finish(&seq, FinishReason::kLength);
    return false;
  }
  return true;
}

// Samples the next token of `seq` from its logits row (modified in place) and emits it.
void Engine::Impl::sample(Sequence& seq, std::span<float> row, std::int64_t& generated) {
  std::vector<float> raw;
  if (seq.request.top_logprobs >= 0) raw.assign(row.begin(), row.end());
  if (seq.grammar && seq.grammar->mask(row) == 0) {
    return finish(&seq, FinishReason::kError, invalid_argument("grammar: no token of the vocabulary can continue the text"));
  }
  const std::int32_t token = seq.sampler.sample(row, seq.tokens);
  if (seq.grammar) {
    if (Status s = seq.grammar->accept(token); !s) return finish(&seq, FinishReason::kError, s);
  }
  const auto now = EngineClock::now();
  const double gap = seconds_between(seq.last_token, now);
  seq.last_token = now;
  // A grammar that allows nothing more ends the request when there is no EOS token to sample.
  if (emit(seq, token, raw, gap, generated) && seq.grammar && seq.grammar->must_end() && seq.request.eos_id < 0) {
    finish(&seq, FinishReason::kStop);
  }
}

// A grammar request's draft rows masked as its grammar stands at each: the root's row at the
// matcher's state, node i's row at that state advanced along the path to node i (a copy per
// node; parents come first). Verification then draws every token from the constrained
// distribution, so speculation stays lossless with respect to it; a draft token the grammar
// refuses has probability 0 and is rejected. A node after which nothing is allowed keeps its raw
// row: the request ends (or fails) there when its token is accepted. Errors: the root allows
// nothing (the grammar is stuck, as in sample()).
Status Engine::Impl::mask_draft_rows(Sequence& seq, std::span<float> rows) {
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  if (seq.grammar->mask(rows.first(vocab)) == 0) return invalid_argument("grammar: no token of the vocabulary can continue the text");
  const DraftTree& tree = seq.spec.tree;
  std::vector<std::optional<GrammarMatcher>> at(static_cast<std::size_t>(tree.size()));
  std::vector<float> raw;
  for (std::size_t i = 0; i < at.size(); ++i) {
    const DraftNode& node = tree.nodes[i];
    const std::optional<GrammarMatcher>& parent = node.parent < 0 ? seq.grammar : at[static_cast<std::size_t>(node.parent)];
    if (!parent) continue;  // below a refused token: never reached
    GrammarMatcher m(*parent);
    if (!m.accept(node.token)) continue;
    const auto row = rows.subspan((1 + i) * vocab, vocab);
    raw.assign(row.begin(), row.end());
    if (m.mask(row) == 0) std::copy(raw.begin(), raw.end(), row.begin());
    at[i] = std::move(m);
  }
  return Status::ok();
}

// Verifies `seq`'s draft tree against its rows [1 + tree size, vocab] (and their features,
// when captured) and emits the accepted tokens and the correction / bonus token; the step's
// latency is spread evenly over them. A grammar request's rows are masked first and its matcher
// advanced by each token emitted. Logprobs come from the rows as the forward left them, as
// sample() reports them: the model's distribution, not the grammar's or the sampler's.
void Engine::Impl::verify(Sequence& seq, std::span<float> rows, std::span<const float> row_features,
                          std::int64_t& generated) {
  const std::int64_t vocab = model.config().vocab_size;
  std::vector<float> raw;
  if (seq.request.top_logprobs >= 0) raw.assign(rows.begin(), rows.end());
  const std::span<const float> logprob_rows = raw.empty() ? std::span<const float>(rows) : std::span<const float>(raw);
  if (seq.grammar) {
    if (Status st = mask_draft_rows(seq, rows); !st) return finish(&seq, FinishReason::kError, st);
  }
  auto verified = speculation.verify(seq, rows, vocab, scheduler, row_features);
  if (!verified) return finish(&seq, FinishReason::kError, verified.status());
  const std::vector<SpecToken>& tokens = *verified;
  const auto now = EngineClock::now();
  const double gap = seconds_between(seq.last_token, now) / static_cast<double>(tokens.size());
  seq.last_token = now;
  for (const SpecToken& t : tokens) {
    const auto row = logprob_rows.subspan(static_cast<std::size_t>(t.row * vocab), static_cast<std::size_t>(vocab));
    if (seq.grammar) {
      if (Status st = seq.grammar->accept(t.token); !st) return finish(&seq, FinishReason::kError, st);
    }
    if (!emit(seq, t.token, row, gap, generated)) return;
    if (seq.grammar && seq.grammar->must_end() && seq.request.eos_id < 0) return finish(&seq, FinishReason::kStop);
  }
}

void Engine::Impl::record_step(std::int64_t prompt_tokens, std::int64_t generated) {
  const auto now = EngineClock::now();
  rate.add(now, prompt_tokens, generated);
  const auto [prompt_rate, gen_rate] = rate.rates(now);
  const std::int64_t free_blocks = cache.pool().n_free() + prefix.n_evictable_blocks();
  std::lock_guard lock(mu);
  EngineMetrics& m = metrics;
  if (prompt_tokens + generated > 0) ++m.steps_total;
  m.prompt_tokens_total += prompt_tokens;
  m.generation_tokens_total += generated;
  m.prompt_tokens_per_s = prompt_rate;
  m.generation_tokens_per_s = gen_rate;
  n_running = m.running = static_cast<std::int64_t>(scheduler.running().size());
  n_waiting = m.waiting = static_cast<std::int64_t>(scheduler.waiting().size());
  m.kv_blocks_total = cache.pool().n_blocks();
  m.kv_blocks_free = free_blocks;
  m.kv_blocks_used = m.kv_blocks_total - free_blocks;
  m.kv_blocks_cached = prefix.n_cached_blocks();
  m.prefix_tokens_queried = prefix.tokens_queried();
  m.prefix_tokens_hit = prefix.tokens_hit();
  m.preemptions_total = scheduler.preemptions();
  if (options.remote_prefill != nullptr) m.kv_bytes_shipped_total = options.remote_prefill->bytes_received();
  if (options.lora != nullptr) {
    m.lora_adapters_resident = options.lora->set().n_slots();
    m.lora_loads_total = options.lora->loads();
    m.lora_evictions_total = options.lora->evictions();
  }
}

// The step's target forward; captures the final hidden states into `features` (after the
// final norm) when a drafter or an embedding request needs them.
Status Engine::Impl::run_forward(const std::vector<ScheduledChunk>& chunks) {
  features.clear();
  const LoraSet* lora = options.lora != nullptr ? &options.lora->set() : nullptr;
  if (options.mirror != nullptr) {
    std::vector<std::int32_t> slot_adapters;  // what each LoRA slot holds, for the mirror's pools
    for (std::int32_t k = 0; lora != nullptr && k < lora->n_slots(); ++k) slot_adapters.push_back(options.lora->adapter_in(k));
    options.mirror->forward(batch, cache.take_follower_update(batch.seq_ids), slot_adapters);
  }
  const bool embeds = std::any_of(chunks.begin(), chunks.end(), [](const ScheduledChunk& c) { return c.seq->request.pooling != Pooling::kNone; });
  if (!embeds && !speculation.needs_features(chunks)) return model.forward(batch, cache, logits, pool, 0, nullptr, lora);
  FinalHiddenCapture capture(model.config().n_layers);
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool, 0, &capture, lora));
  features = capture.values();
  model.output_norm(features, features);
  return Status::ok();
}

bool Engine::Impl::step() {
  take_incoming();
  speculation.plan(scheduler.running(), ctx_len);
  std::vector<ScheduledChunk> chunks = scheduler.schedule();
  for (Sequence* seq : std::vector<Sequence*>(scheduler.stuck())) finish(seq, FinishReason::kLength);
  for (auto& [seq, error] : std::vector(scheduler.failed())) finish(seq, FinishReason::kError, error);
  if (chunks.empty()) {
    record_step(0, 0);  // nothing to compute: K/V still on their way from a remote prefill?
    return !scheduler.awaiting_remote() && (!scheduler.running().empty() || !scheduler.waiting().empty());
  }
  for (const ScheduledChunk& c : chunks) {
    if (c.seq->result.queue_ms == 0) c.seq->result.queue_ms = 1000.0 * seconds_between(c.seq->submitted, EngineClock::now());
  }
  speculation.draft(chunks, pool);
  build_batch(chunks);
  const auto t0 = EngineClock::now();
  Status st = scheduler.plan_kv(batch);
  if (st.is_ok()) st = run_forward(chunks);
  if (!st.is_ok()) {
    for (const ScheduledChunk& c : chunks) finish(c.seq, FinishReason::kError, st);
    record_step(0, 0);
    return true;
  }
  speculation.observe_forward(batch.size(), seconds_between(t0, EngineClock::now()));
  scheduler.commit(chunks);
  std::int64_t prompt_tokens = 0, generated = 0, row = 0, batch_row = 0;
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  const auto dim = static_cast<std::size_t>(model.config().dim);
  for (const ScheduledChunk& c : chunks) {
    Sequence& seq = *c.seq;
    const bool tree = c.n_draft > 0 && !seq.spec.tree.empty();
    const auto batch_rows = static_cast<std::size_t>(c.n_draft > 0 ? 1 + seq.spec.tree.size() : c.n_tokens);
    const auto row_features = features.empty() ? std::span<const float>{}
                                               : std::span<const float>(features).subspan(batch_row * dim, batch_rows * dim);
    batch_row += static_cast<std::int64_t>(batch_rows);
    if (!tree) speculation.keep_features(seq, seq.n_computed - c.n_tokens, row_features, model.config().dim);
    prompt_tokens += std::max<std::int64_t>(0, std::min(seq.n_computed, seq.n_prompt) - (seq.n_computed - c.n_tokens));
    if (seq.request.pooling != Pooling::kNone) {
      pool_rows(seq.request.pooling, seq.n_computed - c.n_tokens, row_features, model.config().dim, seq.pooled);
      if (seq.n_pending() == 0) finish_embedding(seq);
      continue;
    }
    if (seq.n_pending() != 0) continue;  // a prefill chunk short of the end: no logits
    const auto n_rows = static_cast<std::size_t>(1 + seq.spec.tree.size());
    const auto rows = std::span(logits).subspan(static_cast<std::size_t>(row) * vocab, n_rows * vocab);
    row += static_cast<std::int64_t>(n_rows);
    if (tree) {
      verify(seq, rows, row_features, generated);
    } else {
      if (c.n_draft > 0) scheduler.discard_drafts(seq);  // unused draft slots
      sample(seq, rows, generated);
    }
  }
  record_step(prompt_tokens, generated);
  return true;
}

bool Engine::Impl::idle() const {
  std::lock_guard lock(mu);
  return n_unfinished == 0;
}

void Engine::Impl::loop() {
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (stop_loop) return;
    }
    if (step()) continue;
    // Idle, or only K/V arriving from a remote prefill: poll for them every 0.5 ms.
    const auto wait = scheduler.awaiting_remote() ? std::chrono::microseconds(500) : std::chrono::microseconds(100000);
    std::unique_lock lock(mu);
    wake.wait_for(lock, wait,
                  [&] { return !incoming.empty() || !cancels.empty() || stop_loop; });
  }
}

void Engine::Impl::fail_all(const Status& error) {
  take_incoming();
  while (!scheduler.running().empty()) finish(scheduler.running().front().get(), FinishReason::kError, error);
  while (!scheduler.waiting().empty()) finish(scheduler.waiting().front().get(), FinishReason::kError, error);
  record_step(0, 0);
}

Expected<std::unique_ptr<Engine>> Engine::create(const LlamaModel& model, const EngineOptions& options,
                                                 ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(validate_options(model, options));
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model.config().kv_shape(), options.kv));
  if (options.mirror != nullptr) cache.record_for_followers();
  auto impl = std::make_unique<Impl>(model, options, pool, std::move(cache));
  impl->record_step(0, 0);  // the metrics describe the empty pool before the first step runs
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { shutdown(false); }

Expected<std::uint64_t> Engine::submit(RequestOptions request, RequestCallbacks callbacks) {
  std::vector<RequestCallbacks> one;
  one.push_back(std::move(callbacks));
  PEREGRINE_ASSIGN_OR_RETURN(std::vector<std::uint64_t> ids, submit_choices(std::move(request), std::move(one)));
  return ids.front();
}

Expected<std::vector<std::uint64_t>> Engine::submit_choices(RequestOptions request, std::vector<RequestCallbacks> callbacks) {
  Impl& m = *impl_;
  if (callbacks.empty()) return invalid_argument("no choices to submit");
  PEREGRINE_RETURN_IF_ERROR(m.check_request(request));
  if (request.pooling != Pooling::kNone) request.spec = SpecParams{};  // nothing is generated
  std::lock_guard lock(m.mu);
  if (!m.accepting) return unavailable("the server is shutting down");
  const auto n = static_cast<std::int64_t>(callbacks.size());
  const std::int64_t pending = static_cast<std::int64_t>(m.incoming.size()) + m.n_waiting;
  const std::int64_t free_slots = std::max<std::int64_t>(0, m.options.max_running - m.n_running);
  if (pending + n > m.options.max_waiting + free_slots) {
    ++m.metrics.requests_by_status["rejected"];
    return resource_exhausted("the request queue is full (" + std::to_string(m.options.max_waiting) +
                              " waiting); retry later");
  }
  std::vector<std::uint64_t> ids;
  const std::uint64_t seed = request.sampling.seed;
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    const std::uint64_t id = m.next_id++;
    const std::int32_t kv_seq = m.next_kv_seq;
    m.next_kv_seq = m.next_kv_seq == INT32_MAX ? 0 : m.next_kv_seq + 1;
    RequestOptions choice = request;
    choice.sampling.seed = seed + i;
    if (i > 0) choice.prefill_from = ids.front();
    m.incoming.push_back(std::make_unique<Sequence>(id, kv_seq, std::move(choice), std::move(callbacks[i])));
    ids.push_back(id);
  }
  m.n_unfinished += n;
  m.wake.notify_one();
  return ids;
}

Status Engine::check_spec(const SpecParams& spec) const {
  if (impl_->model.on_cuda() && spec.method != SpecMethod::kNone) {
    return invalid_argument("speculative decoding does not run on a CUDA model yet");
  }
  if ((impl_->options.mirror != nullptr || impl_->options.remote_prefill != nullptr) && spec.method != SpecMethod::kNone) {
    return invalid_argument("speculative decoding does not run on a model split across processes (--tp / --pp / --role) yet");
  }
  return impl_->speculation.check(spec);
}

void Engine::cancel(std::uint64_t id) {
  std::lock_guard lock(impl_->mu);
  impl_->cancels.push_back(id);
  impl_->wake.notify_one();
}

void Engine::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->thread.joinable() || impl_->shut_down) return;
  impl_->thread = std::thread([this] { impl_->loop(); });
}

void Engine::shutdown(bool drain, double drain_timeout_s) {
  Impl& m = *impl_;
  bool threaded = false;
  {
    std::lock_guard lock(m.mu);
    if (m.shut_down) return;
    m.shut_down = true;
    m.accepting = false;
    threaded = m.thread.joinable();
  }
  const auto deadline = EngineClock::now() + std::chrono::duration_cast<EngineClock::duration>(
                                                 std::chrono::duration<double>(drain_timeout_s));
  while (drain && !m.idle() && EngineClock::now() < deadline) {
    if (threaded) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    else m.step();
  }
  {
    std::lock_guard lock(m.mu);
    m.stop_loop = true;
    m.wake.notify_one();
  }
  if (threaded) m.thread.join();
  m.fail_all(unavailable("the server is shutting down"));
  if (m.options.mirror != nullptr) m.options.mirror->stop();
  if (m.options.remote_prefill != nullptr) m.options.remote_prefill->stop();
}

bool Engine::step() { return impl_->step(); }

EngineMetrics Engine::metrics() const {
  EngineMetrics m;
  {
    std::lock_guard lock(impl_->mu);
    m = impl_->metrics;
  }
  const ForwardCounters& counters = impl_->model.counters();  // atomics: no lock needed
  m.weight_bytes_read_total = counters.weight_bytes();
  m.n_experts = counters.n_experts();
  m.expert_tokens = counters.expert_tokens();
  return m;
}

const LlamaModel& Engine::model() const { return impl_->model; }
const EngineOptions& Engine::options() const { return impl_->options; }

}  // namespace peregrine

// The serving engine (Orca's iteration-level scheduling, Yu et al. 2022; vLLM's engine /
// scheduler / block-pool split, Kwon et al. 2023): requests queue FCFS; every step builds ONE
// ragged Batch from the running sequences' decode tokens plus prefill chunks of waiting ones
// under a token budget (chunked prefill, Agrawal et al. 2024), runs one forward over the paged
// KV cache, samples, and streams tokens back. When blocks run out the newest running request is
// preempted (its blocks freed, recomputed later). Full prompt blocks go into the prefix cache.
// Requests may decode speculatively (RequestOptions::spec): their draft trees are verified in
// the same step forward (see speculation.h).
#pragma once

#include <cstdint>
#include <memory>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/engine/metrics.h"
#include "peregrine/engine/request.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/engine/forward_mirror.h"
#include "peregrine/engine/lora_pool.h"
#include "peregrine/engine/remote_prefill.h"
#include "peregrine/spec/drafter.h"

namespace peregrine {

struct EngineOptions {
  KvCacheOptions kv;                  // pool size, block size, KV dtype
  std::int64_t max_batch_tokens = 256;  // token budget of one step (decodes + prefill chunks)
  std::int64_t prefill_budget = 0;      // prompt tokens of a step that decodes (SchedulerLimits)
  std::int64_t step_budget = 0;         // rows of a step that decodes, decodes included (SchedulerLimits)
  std::int32_t max_running = 16;      // sequences in flight at once (--parallel)
  std::int32_t max_waiting = 64;      // queued requests beyond which submit fails (HTTP 429)
  std::int64_t ctx_len = 0;           // per-request KV positions (prompt + output − 1); 0 = model's
  bool prefix_caching = true;
  bool swa_full = false;              // keep sliding-window blocks (SchedulerLimits::swa_full)
  /// Serves the requests whose SpecParams::method is drafter->method() (a draft model, layer
  /// skip or quantized self-draft); may be null (prompt lookup needs no drafter). Not owned:
  /// must outlive the engine.
  Drafter* drafter = nullptr;
  /// The LoRA adapters requests may pick (RequestOptions::lora_adapter), loaded on demand
  /// within its max_resident slots; may be null. Not owned: must outlive the engine, and only
  /// the engine's step loop touches it while the engine runs.
  LoraPool* lora = nullptr;
  /// Other processes running every forward beside this engine (engine/forward_mirror.h), or
  /// null. Not owned; the engine calls its stop() when it shuts down. Needs no drafter (a
  /// draft's KV rollback is not mirrored).
  ForwardMirror* mirror = nullptr;
  /// A prefill instance computing the prompts' K/V (engine/remote_prefill.h): this engine is
  /// then the decode instance of a disaggregated pair. Or null. Not owned; the engine calls its
  /// stop() when it shuts down. Needs no mirror, drafter or LoRA pool (the prefill instance
  /// runs the base model alone).
  RemotePrefill* remote_prefill = nullptr;
};

class Engine {
 public:
  /// An engine over `model` (which must outlive it), computing on `pool`.
  /// Errors: kInvalidArgument (max_batch_tokens < 1, prefill_budget < 0, step_budget < 0, max_running < 1, max_waiting < 0,
  /// ctx_len outside [0, model context], a mirror with a drafter, a
  /// remote prefill with a mirror, a drafter or LoRA) and
  /// those of KvCache::create.
  static Expected<std::unique_ptr<Engine>> create(const LlamaModel& model, const EngineOptions& options,
                                                  ThreadPool& pool);
  ~Engine();  // stops the loop thread; unfinished requests end with kError (unavailable)

  /// Queues a request; returns its id. Thread-safe. The callbacks run on the loop thread.
  /// Errors: kInvalidArgument (empty prompt, max_tokens < 1, bad sampling params,
  /// top_logprobs > 20, token id outside the vocabulary, bad spec params or a speculative
  /// method this engine has no drafter for, a LoRA adapter it lacks, speculation or LoRA on a
  /// CUDA model; speculation with a mirror or a remote prefill), kOutOfRange (prompt + 1 token longer
  /// than the context, or needing more KV blocks than the whole pool), kResourceExhausted
  /// (the waiting queue is full), kUnavailable (shutting down).
  Expected<std::uint64_t> submit(RequestOptions request, RequestCallbacks callbacks);
  /// Parallel sampling (OpenAI's n > 1, vLLM's SamplingParams.n): queues callbacks.size()
  /// requests of `request` at once, the i-th sampling with seed + i; the first computes the
  /// prompt, the others share its K/V (RequestOptions::prefill_from). All or none are queued
  /// (submitted one by one, the first could finish before the others arrive). Returns their ids,
  /// the first's first. Errors: those of submit; kResourceExhausted when the queue cannot take
  /// them all; kInvalidArgument for no callbacks.
  Expected<std::vector<std::uint64_t>> submit_choices(RequestOptions request, std::vector<RequestCallbacks> callbacks);

  /// Whether requests may use `spec`. Errors: kInvalidArgument (invalid params, a method
  /// needing a drafter this engine was not created with — the message names the ones it has —
  /// or any method on a CUDA model).
  Status check_spec(const SpecParams& spec) const;
  /// Cancels a queued or running request (unknown or finished ids are ignored); it finishes
  /// with kCancelled at the next step and its blocks return to the pool. Thread-safe.
  void cancel(std::uint64_t id);

  /// Starts the step-loop thread (idempotent).
  void start();
  /// Stops taking requests; with `drain` lets the running and queued ones finish, else fails
  /// them with kUnavailable (so do the ones still unfinished after `drain_timeout_s` seconds);
  /// then stops the loop thread. Blocks until done. Thread-safe; later calls return at once.
  void shutdown(bool drain, double drain_timeout_s = 30.0);

  /// Runs one step on the calling thread (for tests and `generate`, without start()):
  /// returns false when there was nothing to do.
  bool step();

  /// A snapshot of the metrics. Thread-safe.
  EngineMetrics metrics() const;

  const LlamaModel& model() const;
  const EngineOptions& options() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace peregrine

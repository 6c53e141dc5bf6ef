#include "peregrine/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "peregrine/engine/engine.h"

namespace peregrine {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// The context to allocate: the requested one, else just what prompt + max_new_tokens need
/// (capped at the model's context), so a 128k-context model does not reserve 128k positions.
std::int64_t context_length(const LlamaModel& model, std::size_t prompt_len, const GenerateOptions& o) {
  if (o.ctx_len > 0) return o.ctx_len;
  const std::int64_t need = static_cast<std::int64_t>(prompt_len) + std::max<std::int64_t>(o.max_new_tokens, 0);
  return std::max<std::int64_t>(1, std::min(need, model.config().max_seq_len));
}

Status check_request(const LlamaModel& model, std::span<const std::int32_t> prompt,
                     const GenerateOptions& o, std::int64_t ctx) {
  PEREGRINE_RETURN_IF_ERROR(o.sampling.validate());
  PEREGRINE_RETURN_IF_ERROR(o.spec.validate());
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  if (o.max_new_tokens < 0) return invalid_argument("the number of tokens to generate must be >= 0");
  if (ctx <= 0 || ctx > model.config().max_seq_len) {
    return invalid_argument("context length must be in [1, " + std::to_string(model.config().max_seq_len) + "]");
  }
  if (static_cast<std::int64_t>(prompt.size()) > ctx) {
    return out_of_range("the prompt is " + std::to_string(prompt.size()) +
                        " tokens, which exceeds the available context size of " + std::to_string(ctx) + " tokens");
  }
  for (std::int32_t t : prompt) {
    if (t < 0 || t >= model.config().vocab_size) {
      return out_of_range("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                          std::to_string(model.config().vocab_size) + ")");
    }
  }
  return Status::ok();
}

/// One request's engine: the whole prompt in one prefill step, a pool for ctx positions (+ the
/// block the last sampled token may open).
Expected<EngineOptions> engine_options(std::int64_t ctx, std::size_t prompt_len, const GenerateOptions& o) {
  const std::int64_t n_blocks = blocks_for_tokens(ctx + 1, kDefaultKvBlockSize);
  if (n_blocks > std::numeric_limits<std::int32_t>::max()) {
    return out_of_range("a context of " + std::to_string(ctx) + " tokens is too large for the KV cache");
  }
  EngineOptions e;
  e.kv = {static_cast<std::int32_t>(n_blocks), kDefaultKvBlockSize, o.kv_type};
  e.max_batch_tokens = std::max<std::int64_t>(static_cast<std::int64_t>(prompt_len), 1 + kMaxDraftNodes);
  e.max_running = 1;
  e.max_waiting = 1;
  e.ctx_len = ctx;
  e.prefix_caching = false;
  e.drafter = o.drafter;
  e.lora = o.lora;
  return e;
}

StopReason stop_reason(const RequestResult& r, const GenerateOptions& o) {
  if (r.reason == FinishReason::kStop) return StopReason::kEndOfSequence;
  return r.completion_tokens >= o.max_new_tokens ? StopReason::kMaxTokens : StopReason::kContextFull;
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kEndOfSequence: return "eos";
    case StopReason::kContextFull: return "context_full";
  }
  return "?";
}

double GenerationStats::acceptance_rate() const {
  return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
}

double GenerationStats::mean_accepted_per_step() const {
  return spec_steps > 0 ? static_cast<double>(accepted) / static_cast<double>(spec_steps) : 0.0;
}

Expected<GenerationStats> generate(const LlamaModel& model, std::span<const std::int32_t> prompt,
                                   const GenerateOptions& options, ThreadPool& pool,
                                   const std::function<void(std::int32_t)>& on_token) {
  const std::int64_t ctx = context_length(model, prompt.size(), options);
  PEREGRINE_RETURN_IF_ERROR(check_request(model, prompt, options, ctx));
  PEREGRINE_ASSIGN_OR_RETURN(EngineOptions eo, engine_options(ctx, prompt.size(), options));
  PEREGRINE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(model, eo, pool));
  GenerationStats stats;
  stats.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (options.max_new_tokens == 0) return stats;

  RequestOptions request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.max_tokens = options.max_new_tokens;
  request.sampling = options.sampling;
  request.eos_id = options.eos_id;
  request.spec = options.spec;
  request.grammar = options.grammar;
  request.lora_adapter = options.lora != nullptr && options.lora->n_adapters() > 0 ? 0 : -1;
  RequestResult result;
  Clock::time_point first_token, last_token;
  RequestCallbacks callbacks{[&](const TokenEvent& e) {
                               if (std::ranges::find(options.stop_ids, e.token) != options.stop_ids.end()) return false;
                               last_token = Clock::now();
                               if (stats.generated_tokens++ == 0) first_token = last_token;
                               on_token(e.token);
                               return true;
                             },
                             [&](const RequestResult& r) { result = r; }};
  const auto t0 = Clock::now();
  if (auto id = engine->submit(std::move(request), std::move(callbacks)); !id) return id.status();
  while (engine->step()) {}
  if (result.reason == FinishReason::kError) return result.error;
  stats.ttft_ms = result.ttft_ms;
  stats.prefill_tps = static_cast<double>(prompt.size()) / (ms_between(t0, first_token) / 1000.0);
  if (stats.generated_tokens > 1) {
    stats.decode_tps = static_cast<double>(stats.generated_tokens - 1) / (ms_between(first_token, last_token) / 1000.0);
  }
  stats.stop = stop_reason(result, options);
  stats.drafted = result.spec_drafted;
  stats.accepted = result.spec_accepted;
  stats.spec_steps = result.spec_steps;
  return stats;
}

}  // namespace peregrine

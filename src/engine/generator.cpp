#include "peregrine/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "peregrine/kv/kv_cache.h"

namespace peregrine {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  if (o.max_new_tokens < 0) return invalid_argument("the number of tokens to generate must be >= 0");
  if (ctx <= 0 || ctx > model.config().max_seq_len) {
    return invalid_argument("context length must be in [1, " + std::to_string(model.config().max_seq_len) + "]");
  }
  if (static_cast<std::int64_t>(prompt.size()) > ctx) {
    return out_of_range("the prompt is " + std::to_string(prompt.size()) +
                        " tokens, longer than the context of " + std::to_string(ctx) + " tokens");
  }
  return Status::ok();
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

Expected<GenerationStats> generate(const LlamaModel& model, std::span<const std::int32_t> prompt,
                                   const GenerateOptions& options, ThreadPool& pool,
                                   const std::function<void(std::int32_t)>& on_token) {
  const std::int64_t ctx = context_length(model, prompt.size(), options);
  PEREGRINE_RETURN_IF_ERROR(check_request(model, prompt, options, ctx));
  const std::int64_t n_blocks = blocks_for_tokens(ctx, kDefaultKvBlockSize);
  if (n_blocks > std::numeric_limits<std::int32_t>::max()) {
    return out_of_range("a context of " + std::to_string(ctx) + " tokens is too large for the KV cache");
  }
  auto cache = KvCache::create(model.config(), {static_cast<std::int32_t>(n_blocks), kDefaultKvBlockSize, options.kv_type});
  if (!cache) return cache.status();
  GenerationStats stats;
  stats.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (options.max_new_tokens == 0) return stats;

  Sampler sampler(options.sampling);
  std::vector<std::int32_t> history(prompt.begin(), prompt.end());
  std::vector<float> logits;
  Batch batch;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    batch.add(prompt[i], static_cast<std::int32_t>(i), 0, i + 1 == prompt.size());
  }
  const auto t0 = Clock::now();
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, *cache, logits, pool));
  const double prefill_ms = ms_since(t0);
  stats.prefill_tps = static_cast<double>(prompt.size()) / (prefill_ms / 1000.0);
  Clock::time_point decode_start;
  for (;;) {
    const std::int32_t next = sampler.sample(logits, history);
    if (stats.generated_tokens == 0) {
      stats.ttft_ms = ms_since(t0);
      decode_start = Clock::now();
    }
    if (next == options.eos_id) { stats.stop = StopReason::kEndOfSequence; break; }
    ++stats.generated_tokens;
    history.push_back(next);
    on_token(next);
    if (stats.generated_tokens >= options.max_new_tokens) { stats.stop = StopReason::kMaxTokens; break; }
    const auto pos = static_cast<std::int32_t>(history.size() - 1);
    if (pos >= ctx) { stats.stop = StopReason::kContextFull; break; }
    batch.clear();
    batch.add(next, pos, 0, true);
    PEREGRINE_RETURN_IF_ERROR(model.forward(batch, *cache, logits, pool));
  }
  const double decode_ms = ms_since(decode_start);
  if (stats.generated_tokens > 1 && decode_ms > 0) {
    stats.decode_tps = static_cast<double>(stats.generated_tokens - 1) / (decode_ms / 1000.0);
  }
  return stats;
}

}  // namespace peregrine

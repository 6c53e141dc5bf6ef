// Single-sequence text generation: one batched prefill of the prompt, then one decode step per
// token, sampling each next token, with timing stats (TTFT, prefill and decode tokens/s).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/sampling/sampler.h"

namespace peregrine {

enum class StopReason { kMaxTokens, kEndOfSequence, kContextFull };
/// "max_tokens", "eos", "context_full".
const char* stop_reason_name(StopReason r);

struct GenerateOptions {
  std::int32_t max_new_tokens = 128;  // -n
  std::int64_t ctx_len = 0;           // KV cache positions; 0 = min(prompt + max_new_tokens, model context)
  DType kv_type = DType::kF32;        // KV cache element type: kF32, kF16 or kQ8_0 (--kv-type)
  std::int32_t eos_id = -1;           // stop token (-1: none)
  SamplingParams sampling;
};

struct GenerationStats {
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;
  double ttft_ms = 0;      // start of prefill → first token sampled (ms)
  double prefill_tps = 0;  // prompt tokens / prefill time (tokens/s)
  double decode_tps = 0;   // tokens after the first / their decode time (tokens/s)
  StopReason stop = StopReason::kMaxTokens;
};

/// Generates up to options.max_new_tokens tokens after `prompt` (token ids, usually starting
/// with BOS), calling `on_token(id)` for each as soon as it is sampled (the EOS token is not
/// reported). Stops at max_new_tokens, at eos_id, or when the context is full.
/// The K/V live in a paged KvCache of ceil(context / 16) blocks of 16 positions in
/// options.kv_type. Errors: kInvalidArgument (empty prompt, max_new_tokens < 0, bad sampling
/// params, ctx_len outside [1, model context], a kv_type KvCache::create rejects), kOutOfRange
/// (prompt longer than the context, a KV cache larger than physical memory, token ids outside
/// the vocabulary), and any error of LlamaModel::forward.
Expected<GenerationStats> generate(const LlamaModel& model, std::span<const std::int32_t> prompt,
                                   const GenerateOptions& options, ThreadPool& pool,
                                   const std::function<void(std::int32_t)>& on_token);

}  // namespace peregrine

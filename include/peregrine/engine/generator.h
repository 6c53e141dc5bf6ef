// Single-sequence text generation through the serving engine (one request, stepped on the
// calling thread): one batched prefill of the prompt, then decode steps, plain or speculative,
// with timing and speculation stats (TTFT, prefill and decode tokens/s, acceptance).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/engine/lora_pool.h"
#include "peregrine/sampling/grammar_matcher.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/drafter.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine {

enum class StopReason { kMaxTokens, kEndOfSequence, kContextFull };
/// "max_tokens", "eos", "context_full".
const char* stop_reason_name(StopReason r);

struct GenerateOptions {
  std::int32_t max_new_tokens = 128;  // -n
  std::int64_t ctx_len = 0;           // KV cache positions; 0 = min(prompt + max_new_tokens, model context)
  DType kv_type = DType::kF32;        // KV cache element type (--kv-type; kv/kv_cache.h lists them)
  std::int32_t eos_id = -1;           // stop token (-1: none)
  std::vector<std::int32_t> stop_ids; // tokens that also end the generation, unreported like EOS
                                      // (a chat template's end-of-turn: tokenizer/chat_prompt.h)
  SamplingParams sampling;
  SpecParams spec;             // speculative decoding (--spec); kNone: plain decoding
  Drafter* drafter = nullptr;  // serves spec.method when it is draft / layerskip / quant
  LoraPool* lora = nullptr;    // LoRA adapters (engine/lora_pool.h): adapter 0 applies, when given
  TokenGrammar grammar;        // the output follows it (--grammar); empty: unconstrained
};

struct GenerationStats {
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;
  double ttft_ms = 0;      // start of prefill → first token sampled (ms)
  double prefill_tps = 0;  // prompt tokens / prefill time (tokens/s)
  double decode_tps = 0;   // tokens after the first / their decode time (tokens/s)
  StopReason stop = StopReason::kMaxTokens;
  std::int64_t drafted = 0;   // draft tokens proposed
  std::int64_t accepted = 0;  // of them accepted
  std::int64_t spec_steps = 0;  // verification steps
  /// accepted / drafted (0 without drafts).
  double acceptance_rate() const;
  /// Draft tokens accepted per verification step (0 without steps).
  double mean_accepted_per_step() const;
};

/// Generates up to options.max_new_tokens tokens after `prompt` (token ids, usually starting
/// with BOS), calling `on_token(id)` for each as soon as it is sampled (the EOS token is not
/// reported, nor are stop_ids). Stops at max_new_tokens, at eos_id or one of stop_ids, or when the context is full (the token
/// sampled at the last position is kept). Runs one Engine request with a paged KV cache of
/// blocks of 16 positions in options.kv_type. Greedy speculative decoding returns exactly the
/// tokens of plain greedy decoding; sampled speculative decoding draws from the same
/// distribution. Errors: kInvalidArgument (empty prompt, max_new_tokens < 0, bad sampling or
/// spec params, a spec method needing a drafter that is missing, ctx_len outside [1, model
/// context], a kv_type KvCache::create rejects), kOutOfRange (prompt longer than the context,
/// a KV cache larger than physical memory, token ids outside the vocabulary), and any error
/// of LlamaModel::forward.
Expected<GenerationStats> generate(const LlamaModel& model, std::span<const std::int32_t> prompt,
                                   const GenerateOptions& options, ThreadPool& pool,
                                   const std::function<void(std::int32_t)>& on_token);

}  // namespace peregrine

// What a client asks the serving engine for, and what it gets back as the request runs.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/engine/pooling.h"
#include "peregrine/sampling/grammar_matcher.h"
#include "peregrine/sampling/sampler.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine {

/// One generation request (the server maps an OpenAI request onto it).
struct RequestOptions {
  std::vector<std::int32_t> prompt;  // token ids (BOS included when the model wants it)
  std::int32_t max_tokens = 16;      // >= 1 generated tokens at most
  SamplingParams sampling;           // temperature 0 = greedy; seed fixes the draws
  std::int32_t top_logprobs = -1;    // -1: no logprobs; 0..20: chosen token's + this many top
  std::int32_t eos_id = -1;          // end-of-sequence token (the tokenizer's; -1: none)
  bool ignore_eos = false;           // keep generating past eos_id (fixed-length benchmarks)
  SpecParams spec;                   // speculative decoding (method kNone: plain decoding)
  /// LoRA adapter of EngineOptions::lora to apply (engine/lora_pool.h), -1: the base model.
  /// Prefix-cache blocks are shared only among requests of the same adapter (its K/V differ).
  std::int32_t lora_adapter = -1;
  /// A grammar the output must follow (sampling/grammar_matcher.h; empty: none): every step's
  /// logits are masked to the tokens it allows; with speculation, each draft row at the grammar's
  /// state along its draft path (lossless with respect to the constrained distribution).
  TokenGrammar grammar;
  /// Parallel sampling (OpenAI's n > 1, vLLM's parallel sampling): the id of an earlier request
  /// with the same prompt and adapter whose prompt K/V this one shares instead of computing them
  /// (0: none). It waits while that request is queued or prefilling, then forks its KV blocks
  /// (copy-on-write) up to the last prompt token and computes only that token, with its own
  /// sampler. It computes its own prompt when that request is gone, or on a model with
  /// sliding-window layers (their released blocks; unless --swa-full).
  std::uint64_t prefill_from = 0;
  /// Not kNone: an embedding request (engine/pooling.h). Its whole prompt is computed (no
  /// prefix-cache hit, no fork), nothing is generated (max_tokens and sampling unused), and
  /// RequestResult::embedding holds the pooled final hidden states, unit L2 norm.
  Pooling pooling = Pooling::kNone;
};

/// One generated token, reported as soon as it is sampled.
struct TokenEvent {
  std::int32_t token = -1;
  /// log p(token) under the model's distribution at temperature 1 (log-softmax of the raw
  /// logits, nats); only filled when top_logprobs >= 0.
  float logprob = 0.0f;
  /// The `top_logprobs` most likely tokens as (id, logprob), most likely first.
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

enum class FinishReason {
  kStop,       // EOS sampled, or the on_token callback asked to stop (stop string)
  kLength,     // max_tokens generated, or the context is full
  kCancelled,  // Engine::cancel (client disconnected)
  kError,      // the engine failed the request (shutdown, internal error): see `error`
};
/// "stop", "length", "cancelled", "error" (OpenAI finish_reason values where they exist).
const char* finish_reason_name(FinishReason r);

/// How a request ended, with its usage and timings.
struct RequestResult {
  FinishReason reason = FinishReason::kStop;
  Status error;                         // set when reason == kError
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_prompt_tokens = 0;  // served from the prefix cache (or prefill_from's K/V)
  std::int32_t preemptions = 0;           // times it was preempted and recomputed
  double queue_ms = 0;  // submit → first scheduled
  double ttft_ms = 0;   // submit → first token sampled
  double e2e_ms = 0;    // submit → finished
  std::int64_t spec_drafted = 0;   // draft tokens (tree nodes) proposed
  std::int64_t spec_accepted = 0;  // of them accepted by verification
  std::int64_t spec_steps = 0;     // verification steps (target forwards carrying a draft)
  std::vector<float> embedding = {};  // an embedding request's [dim] f32 (RequestOptions::pooling)
};

/// Callbacks of one request, invoked on the engine's step-loop thread (keep them short: push
/// into a queue). on_token returns false to stop the request now (finish reason kStop: the
/// token is kept and counted); on_finish is called exactly once, last, after which the
/// request's KV blocks are back in the pool.
struct RequestCallbacks {
  std::function<bool(const TokenEvent&)> on_token;
  std::function<void(const RequestResult&)> on_finish;
};

}  // namespace peregrine

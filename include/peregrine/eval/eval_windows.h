// Sliding windows over a long token sequence for teacher-forced evaluation (perplexity, KL
// divergence against a reference), as in the Hugging Face "Perplexity of fixed-length models"
// guide: windows of `ctx` tokens start every `stride` tokens; the first window scores every
// token it can predict, each later one only the tokens no earlier window scored, so every
// scored token but those of the first window sees at least ctx - stride tokens of context.
//
// No BOS is inserted at window starts (the HF guide does not): a window that starts mid-text is
// fed the text as it is, so its first tokens act only as context. The sequence's own BOS, when
// the tokenizer adds one, starts the first window. llama-perplexity's scoring — disjoint chunks,
// each starting with BOS and scoring its second half — is the other plan (plan_llamacpp_chunks).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

/// How a token sequence is cut into windows, and the KV cache the evaluated model uses.
struct EvalWindowOptions {
  std::int64_t ctx = 0;     // tokens per window: >= 2, at most the model's context
  std::int64_t stride = 0;  // tokens between window starts: 1 <= stride <= ctx (sliding windows)
  DType kv_type = DType::kF32;  // the evaluated model's K/V (a reference model uses f32)
  bool llamacpp_chunks = false;  // llama-perplexity's chunks (plan_llamacpp_chunks) instead of
                                 // sliding windows; stride is then unused
  std::int64_t n_chunks = 0;     // llamacpp_chunks: how many (0: every whole chunk)
  std::int32_t chunk_bos = -1;   // llamacpp_chunks: the token each chunk starts with (-1: none)
};

/// One window: tokens [begin, end) are fed at positions 0 .. end - begin - 1 (tokens[begin]
/// replaced by first_token when that is >= 0), and tokens [first_target, end) are scored
/// (token t predicted by the logits of the row of token t - 1).
struct EvalWindow {
  std::int64_t begin = 0, end = 0, first_target = 0;
  std::int32_t first_token = -1;
  std::int64_t n_targets() const { return end - first_target; }
};

/// Windows over n_tokens tokens: begin = k · stride for k = 0, 1, ... until a window reaches
/// the end; end = min(begin + ctx, n_tokens); first_target = 1 for the first window, else
/// max(previous end, begin + 1). With stride == ctx the windows are disjoint and the first
/// token of every later window is not scored (nothing in its window precedes it), as in the HF
/// guide. Every token in [1, n_tokens) is scored at most once.
/// Errors: kInvalidArgument (n_tokens < 2, ctx < 2, stride < 1 or > ctx).
Expected<std::vector<EvalWindow>> plan_windows(std::int64_t n_tokens, std::int64_t ctx, std::int64_t stride);

/// llama-perplexity's chunks (llama.cpp tools/perplexity/perplexity.cpp, perplexity()): chunk k
/// is tokens [k·ctx, (k+1)·ctx), for the n_chunks first (0: all) of the n_tokens / ctx whole
/// chunks; it is fed with its first token replaced by `bos` (when bos >= 0: the model adds a
/// BOS) and scores only its second half, the tokens at offsets ctx/2 + 1 .. ctx - 1 (ctx - 1 -
/// ctx/2 per chunk; the first ctx/2 + 1 tokens are context). Errors: kInvalidArgument (ctx < 4,
/// n_chunks < 0, fewer than 2·ctx tokens: llama-perplexity's own minimum).
Expected<std::vector<EvalWindow>> plan_llamacpp_chunks(std::int64_t n_tokens, std::int64_t ctx, std::int64_t n_chunks,
                                                       std::int32_t bos);

/// The windows `o` asks for over n_tokens tokens: plan_llamacpp_chunks when o.llamacpp_chunks,
/// else plan_windows. Errors: theirs.
Expected<std::vector<EvalWindow>> plan_eval_windows(std::int64_t n_tokens, const EvalWindowOptions& o);

/// Called after each window with (windows done, windows in total).
using EvalProgress = std::function<void(std::int64_t done, std::int64_t total)>;

/// A single-sequence paged KV cache (blocks of 16) for windows of up to `ctx` tokens of
/// `config`'s model, K/V in `kv_type`. Errors: kInvalidArgument (ctx < 1 or longer than
/// config.max_seq_len), those of KvCache::create.
Expected<KvCache> make_window_cache(const ModelConfig& config, std::int64_t ctx, DType kv_type);

/// Runs `model` on window `w` of `tokens` (one prefill forward from position 0 in sequence 0 of
/// `cache`, which it leaves empty) and sets `logits` to [w.n_targets(), vocab] f32: row j is the
/// distribution over tokens[w.first_target + j]. Preconditions: `w` comes from plan_windows
/// over tokens.size() tokens; cache built by make_window_cache with ctx >= w.end - w.begin.
/// Errors: forward's (kOutOfRange for a token id outside the vocabulary or a window longer than
/// the model's context).
Status window_logits(const LlamaModel& model, std::span<const std::int32_t> tokens, const EvalWindow& w,
                     KvCache& cache, ThreadPool& pool, std::vector<float>& logits);

}  // namespace peregrine

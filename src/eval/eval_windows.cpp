#include "peregrine/eval/eval_windows.h"

#include <algorithm>
#include <string>

#include "peregrine/model/batch.h"

namespace peregrine {

Expected<std::vector<EvalWindow>> plan_windows(std::int64_t n_tokens, std::int64_t ctx, std::int64_t stride) {
  if (n_tokens < 2) return invalid_argument("evaluation needs at least 2 tokens (got " + std::to_string(n_tokens) + ")");
  if (ctx < 2) return invalid_argument("the window length --ctx must be >= 2 (got " + std::to_string(ctx) + ")");
  if (stride < 1 || stride > ctx) {
    return invalid_argument("--stride must be in [1, ctx = " + std::to_string(ctx) + "] (got " + std::to_string(stride) + ")");
  }
  std::vector<EvalWindow> windows;
  std::int64_t prev_end = 0;
  for (std::int64_t begin = 0;; begin += stride) {
    const std::int64_t end = std::min(begin + ctx, n_tokens);
    const EvalWindow w{begin, end, windows.empty() ? 1 : std::max(prev_end, begin + 1)};
    if (w.n_targets() > 0) windows.push_back(w);  // stride == ctx: [n - 1, n) has none
    prev_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

Expected<std::vector<EvalWindow>> plan_llamacpp_chunks(std::int64_t n_tokens, std::int64_t ctx, std::int64_t n_chunks,
                                                       std::int32_t bos) {
  if (ctx < 4) return invalid_argument("the chunk length --ctx must be >= 4 (got " + std::to_string(ctx) + ")");
  if (n_chunks < 0) return invalid_argument("--chunks must be >= 0 (got " + std::to_string(n_chunks) + ")");
  if (n_tokens < 2 * ctx) {
    return invalid_argument("llama.cpp's perplexity scoring needs at least 2 * ctx = " + std::to_string(2 * ctx) +
                            " tokens (got " + std::to_string(n_tokens) + ")");
  }
  const std::int64_t whole = n_tokens / ctx, count = n_chunks == 0 ? whole : std::min(whole, n_chunks);
  std::vector<EvalWindow> windows;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t begin = k * ctx;
    windows.push_back({begin, begin + ctx, begin + ctx / 2 + 1, bos});
  }
  return windows;
}

Expected<std::vector<EvalWindow>> plan_eval_windows(std::int64_t n_tokens, const EvalWindowOptions& o) {
  if (o.llamacpp_chunks) return plan_llamacpp_chunks(n_tokens, o.ctx, o.n_chunks, o.chunk_bos);
  return plan_windows(n_tokens, o.ctx, o.stride);
}

Expected<KvCache> make_window_cache(const ModelConfig& config, std::int64_t ctx, DType kv_type) {
  if (ctx < 1 || ctx > config.max_seq_len) {
    return invalid_argument("a window of " + std::to_string(ctx) + " tokens does not fit the model's context of " +
                            std::to_string(config.max_seq_len));
  }
  const auto n_blocks = static_cast<std::int32_t>(blocks_for_tokens(ctx, kDefaultKvBlockSize));
  return KvCache::create(config.kv_shape(), {n_blocks, kDefaultKvBlockSize, kv_type});
}

Status window_logits(const LlamaModel& model, std::span<const std::int32_t> tokens, const EvalWindow& w,
                     KvCache& cache, ThreadPool& pool, std::vector<float>& logits) {
  Batch batch;
  for (std::int64_t i = w.begin; i < w.end; ++i) {
    const bool scores_next = i + 1 >= w.first_target && i + 1 < w.end;
    const std::int32_t token = i == w.begin && w.first_token >= 0 ? w.first_token : tokens[static_cast<std::size_t>(i)];
    batch.add(token, static_cast<std::int32_t>(i - w.begin), 0, scores_next);
  }
  cache.free_sequence(0);
  Status st = model.forward(batch, cache, logits, pool);
  cache.free_sequence(0);
  return st;
}

}  // namespace peregrine

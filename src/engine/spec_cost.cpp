#include "peregrine/engine/spec_cost.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "peregrine/kv/kv_cache.h"

namespace peregrine {
namespace {

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::int32_t> random_tokens(std::int64_t n, std::int64_t vocab, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (auto& t : out) t = token(rng);
  return out;
}

}  // namespace

Expected<std::vector<double>> measure_verify_seconds(const LlamaModel& model, std::int64_t context,
                                                     const std::vector<std::int32_t>& ks, std::int32_t reps,
                                                     ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const std::int32_t k_max = ks.empty() ? 0 : *std::max_element(ks.begin(), ks.end());
  if (context < 1 || reps < 1) return invalid_argument("verify cost: context and reps must be >= 1");
  if (std::any_of(ks.begin(), ks.end(), [](std::int32_t k) { return k < 0; }) || context + k_max + 1 > c.max_seq_len) {
    return invalid_argument("verify cost: every k must be >= 0 and context + k + 1 within the model's context");
  }
  PEREGRINE_ASSIGN_OR_RETURN(
      KvCache cache, KvCache::create(c.kv_shape(), {static_cast<std::int32_t>(blocks_for_tokens(context + k_max + 1, kDefaultKvBlockSize)),
                                         kDefaultKvBlockSize, DType::kF32}));
  std::mt19937 rng(1234);
  const std::vector<std::int32_t> prompt = random_tokens(context, c.vocab_size, rng);
  Batch batch;
  for (std::int64_t i = 0; i < context; ++i) batch.add(prompt[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i), 0, i + 1 == context);
  std::vector<float> logits;
  PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
  std::vector<double> out;
  for (std::int32_t k : ks) {
    const std::vector<std::int32_t> rows = random_tokens(k + 1, c.vocab_size, rng);
    batch.clear();
    for (std::int32_t i = 0; i <= k; ++i) batch.add(rows[static_cast<std::size_t>(i)], static_cast<std::int32_t>(context + i), 0, true);
    std::vector<double> times;
    for (std::int32_t r = 0; r <= reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
      if (r > 0) times.push_back(seconds_since(t0));
      cache.truncate(0, context);
    }
    out.push_back(median(times));
  }
  return out;
}

Expected<double> measure_draft_seconds_per_token(Drafter& drafter, const ModelConfig& target, std::int64_t context,
                                                 std::int32_t k, std::int32_t reps, ThreadPool& pool) {
  if (context < 1 || k < 1 || reps < 1) return invalid_argument("draft cost: context, k and reps must be >= 1");
  std::mt19937 rng(99);
  std::vector<std::int32_t> tokens = random_tokens(context + reps + 1, target.vocab_size, rng);
  std::vector<float> features;
  if (drafter.needs_features()) {
    std::normal_distribution<float> normal;
    features.resize(static_cast<std::size_t>((context + reps) * target.dim));
    for (float& f : features) f = normal(rng);
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<DraftTree> trees;
  std::vector<double> times;
  for (std::int32_t r = 0; r <= reps; ++r) {
    // Features of the positions new since the last call: [0, context - 1) first, then one.
    const std::int64_t begin = r == 0 ? 0 : context + r - 2, end = context + r - 1;
    const auto new_features = features.empty() ? std::span<const float>{}
                                               : std::span<const float>(features).subspan(
                                                     static_cast<std::size_t>(begin * target.dim),
                                                     static_cast<std::size_t>((end - begin) * target.dim));
    const DraftRequest request{0, std::span(tokens).first(static_cast<std::size_t>(context + r)), k, 1, &greedy, nullptr,
                               new_features, begin};
    const auto t0 = std::chrono::steady_clock::now();
    PEREGRINE_RETURN_IF_ERROR(drafter.draft(std::span(&request, 1), trees, pool));
    if (r > 0) times.push_back(seconds_since(t0) / k);
  }
  drafter.release(0);
  return median(times);
}

}  // namespace peregrine

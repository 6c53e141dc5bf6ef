// The model over the paged KV cache: block size does not change the logits, and a sequence
// attached to cached prefix blocks (PrefixCache) gets the logits of computing alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "peregrine/kv/prefix_cache.h"
#include "peregrine/model/llama_model.h"
#include "test_models.h"

namespace peregrine {
namespace {

// Block sizes only change which blocks hold a row and how a KV tile is split into runs (gathered
// or read in place); 1e-5 is the f32-accumulation tolerance the batch tests use.
constexpr float kTol = 1e-5f;

const std::vector<std::int32_t> kPrompt = {1,   403, 407, 261, 378, 300, 17,  42,  99,  261, 5,   290, 330,
                                           407, 261, 378, 300, 17,  42,  99,  261, 5,   290, 330, 403, 1,
                                           88,  301, 302, 303, 17,  18,  19,  20,  21,  22,  23,  24,  25, 26};

// Logits of every prompt row (one prefill) followed by 8 decode steps of fixed tokens.
std::vector<float> run(const LlamaModel& model, KvCache& cache, std::int32_t seq, std::int32_t p0,
                       const std::vector<std::int32_t>& tokens, ThreadPool& pool) {
  std::vector<float> all, logits;
  Batch batch;
  for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], p0 + static_cast<std::int32_t>(i), seq, true);
  EXPECT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
  all = logits;
  for (std::int32_t step = 0; step < 8; ++step) {
    batch.clear();
    batch.add(100 + step, p0 + static_cast<std::int32_t>(tokens.size()) + step, seq, true);
    EXPECT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(PagedKv, BlockSizeDoesNotChangeTheLogits) {
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(2);
  const std::int64_t n = static_cast<std::int64_t>(kPrompt.size()) + 8;
  KvCache ref_cache = test::make_kv_cache(model->config(), n, 1, 16);
  const auto ref = run(*model, ref_cache, 0, 0, kPrompt, pool);
  for (std::int32_t block : {1, 64}) {
    KvCache cache = test::make_kv_cache(model->config(), n, 1, block);
    const float diff = max_abs_diff(run(*model, cache, 0, 0, kPrompt, pool), ref);
    std::printf("[ paged ] block %2d vs 16: max|dlogit| %.2e\n", block, static_cast<double>(diff));
    EXPECT_LE(diff, kTol) << "block " << block;
  }
}

TEST(PagedKv, SharedPrefixBlocksGiveTheLogitsOfComputingAlone) {
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(2);
  constexpr std::int32_t kBlock = 16;
  // B shares A's first 32 tokens (two full blocks), then differs.
  const std::vector<std::int32_t> a = kPrompt;
  std::vector<std::int32_t> b(a.begin(), a.begin() + 32);
  for (std::int32_t t : {7, 8, 9, 10, 11, 12, 13}) b.push_back(t);

  KvCache alone = test::make_kv_cache(model->config(), 64, 1, kBlock);
  const auto b_alone = run(*model, alone, 0, 0, b, pool);
  // B in the shared run's two chunks on its own blocks: how far those shapes alone move the
  // logits (f32 sums in other orders: 7.6e-6 on x86-64 with AVX-512, 1.3e-5 on NEON).
  KvCache chunked = test::make_kv_cache(model->config(), 64, 1, kBlock);
  run(*model, chunked, 0, 0, std::vector<std::int32_t>(b.begin(), b.begin() + 32), pool);

  KvCache cache = test::make_kv_cache(model->config(), 64, 2, kBlock);
  PrefixCache prefix(cache);
  run(*model, cache, 0, 0, a, pool);
  prefix.insert(a, cache.block_table(0));
  EXPECT_EQ(prefix.n_cached_blocks(), 2);
  const auto hit = prefix.match(b, (static_cast<std::int64_t>(b.size()) - 1) / kBlock);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(prefix.tokens_hit(), 32);
  const std::int64_t free_before = cache.pool().n_free();
  cache.attach_prefix(1, hit, 32);
  const std::vector<std::int32_t> b_suffix(b.begin() + 32, b.end());
  // The suffix prefill: logits rows for b[32..] and the decode steps, continuing at position 32.
  const auto b_shared = run(*model, cache, 1, 32, b_suffix, pool);
  const std::size_t vocab = static_cast<std::size_t>(model->config().vocab_size);
  const std::vector<float> b_alone_tail(b_alone.begin() + 32 * static_cast<std::ptrdiff_t>(vocab), b_alone.end());
  const auto b_chunked = run(*model, chunked, 0, 32, b_suffix, pool);
  const float diff = max_abs_diff(b_shared, b_alone_tail), own = max_abs_diff(b_shared, b_chunked),
              shapes = max_abs_diff(b_chunked, b_alone_tail);
  std::printf("[ paged ] shared prefix vs alone: max|dlogit| %.2e (the same chunks on its own blocks: %.2e, and they "
              "against alone %.2e), blocks used %lld instead of %lld\n",
              static_cast<double>(diff), static_cast<double>(own), static_cast<double>(shapes),
              static_cast<long long>(free_before - cache.pool().n_free()),
              static_cast<long long>(blocks_for_tokens(static_cast<std::int64_t>(b.size()) + 8, kBlock)));
  // The shared blocks hold A's K/V of the same 32 tokens (A's prefill had 40 rows, B's own
  // chunk 32): B's own blocks give the same logits; against alone, what the chunks' shapes move.
  EXPECT_LE(own, kTol);
  EXPECT_LE(diff, shapes + kTol);
  EXPECT_EQ(free_before - cache.pool().n_free(), blocks_for_tokens(static_cast<std::int64_t>(b.size()) + 8, kBlock) - 2);

  // A continues after B wrote next to its shared blocks: A's K/V are intact.
  KvCache a_alone_cache = test::make_kv_cache(model->config(), 64, 1, kBlock);
  std::vector<std::int32_t> a_more = a;
  for (std::int32_t step = 0; step < 8; ++step) a_more.push_back(100 + step);
  a_more.push_back(5);
  std::vector<float> want, got;
  Batch whole;
  for (std::size_t i = 0; i < a_more.size(); ++i) whole.add(a_more[i], static_cast<std::int32_t>(i), 0, i + 1 == a_more.size());
  ASSERT_TRUE(model->forward(whole, a_alone_cache, want, pool).is_ok());
  Batch next;
  next.add(5, static_cast<std::int32_t>(a_more.size()) - 1, 0, true);
  ASSERT_TRUE(model->forward(next, cache, got, pool).is_ok());
  EXPECT_LE(max_abs_diff(got, want), kTol);
}

}  // namespace
}  // namespace peregrine

// The ragged Batch: several sequences in one forward give the same logits as separate runs,
// and malformed batches are rejected before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "peregrine/model/llama_model.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

LlamaModel load_stories() {
  auto file = load_model_file(test::shared_dir() + "/models/stories260K/stories260K.gguf");
  EXPECT_TRUE(file) << file.status().message();
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  return std::move(*m);
}

TEST(RaggedBatch, TwoSequencesInOneForwardMatchSeparateRuns) {
  const LlamaModel model = load_stories();
  ThreadPool pool(2);
  const std::vector<std::int32_t> a = {1, 403, 407, 261, 378}, b = {1, 261, 300, 17};
  const std::int64_t vocab = model.config().vocab_size;

  auto last_logits = [&](const std::vector<std::int32_t>& toks) {
    KvCache cache = test::make_kv_cache(model.config(), 64);
    Batch batch;
    for (std::size_t i = 0; i < toks.size(); ++i) batch.add(toks[i], static_cast<std::int32_t>(i), 0, i + 1 == toks.size());
    std::vector<float> logits;
    EXPECT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
    return logits;
  };
  // Interleave the rows of both sequences (seq 1 first) in a single ragged batch.
  KvCache cache = test::make_kv_cache(model.config(), 64, 2);
  Batch batch;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < b.size()) batch.add(b[i], static_cast<std::int32_t>(i), 1, i + 1 == b.size());
    if (i < a.size()) batch.add(a[i], static_cast<std::int32_t>(i), 0, i + 1 == a.size());
  }
  std::vector<float> logits;
  ASSERT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(2 * vocab));
  const auto la = last_logits(a), lb = last_logits(b);
  for (std::int64_t v = 0; v < vocab; ++v) {  // rows with logits come out in batch order: b then a
    EXPECT_NEAR(logits[v], lb[v], 1e-5);
    EXPECT_NEAR(logits[vocab + v], la[v], 1e-5);
  }
  EXPECT_EQ(cache.length(0), 5);
  EXPECT_EQ(cache.length(1), 4);
}

TEST(RaggedBatch, ChunkedPrefillMatchesOneShot) {
  // A prompt fed as chunks continuing the cache (prefill runs at p0 > 0, a lone decode row,
  // then two sequences' runs side by side) gives the logits of one whole-prompt forward.
  const LlamaModel model = load_stories();
  ThreadPool pool(2);
  const std::vector<std::int32_t> toks = {1, 403, 407, 261, 378, 300, 17, 42, 99, 261, 5};
  const std::int64_t vocab = model.config().vocab_size;
  KvCache one_cache = test::make_kv_cache(model.config(), 64);
  Batch whole;
  for (std::size_t i = 0; i < toks.size(); ++i) whole.add(toks[i], static_cast<std::int32_t>(i), 0, true);
  std::vector<float> expected;
  ASSERT_TRUE(model.forward(whole, one_cache, expected, pool).is_ok());

  KvCache cache = test::make_kv_cache(model.config(), 64, 2);
  std::vector<float> logits;
  for (auto [begin, end] : {std::pair<std::size_t, std::size_t>{0, 4}, {4, 5}, {5, 11}}) {
    Batch chunk;  // seq 0's rows, then the same tokens as seq 1
    for (std::int32_t seq : {0, 1}) {
      for (std::size_t i = begin; i < end; ++i) chunk.add(toks[i], static_cast<std::int32_t>(i), seq, true);
    }
    ASSERT_TRUE(model.forward(chunk, cache, logits, pool).is_ok());
    for (std::size_t r = 0; r < 2 * (end - begin); ++r) {
      const std::size_t i = begin + r % (end - begin);
      for (std::int64_t v = 0; v < vocab; ++v) {
        ASSERT_NEAR(logits[r * vocab + v], expected[i * vocab + v], 1e-5) << "token " << i << " row " << r;
      }
    }
  }
}

TEST(RaggedBatch, MalformedBatchesAreRejected) {
  const LlamaModel model = load_stories();
  ThreadPool pool(1);
  KvCache cache = test::make_kv_cache(model.config(), 16);  // one block of 16 positions
  std::vector<float> logits;
  auto code = [&](const Batch& b) { return model.forward(b, cache, logits, pool).code(); };
  Batch empty;
  EXPECT_EQ(code(empty), ErrorCode::kInvalidArgument);
  Batch gap;
  gap.add(1, 0, 0, false);
  gap.add(2, 2, 0, true);
  EXPECT_EQ(code(gap), ErrorCode::kInvalidArgument);
  Batch ahead;  // starts past the cached length
  ahead.add(1, 3, 0, true);
  EXPECT_EQ(code(ahead), ErrorCode::kInvalidArgument);
  Batch new_seq_ahead;  // a new sequence must start at 0
  new_seq_ahead.add(1, 0, 0, false);
  new_seq_ahead.add(1, 1, 7, true);
  EXPECT_EQ(code(new_seq_ahead), ErrorCode::kInvalidArgument);
  Batch bad_token;
  bad_token.add(512, 0, 0, true);
  EXPECT_EQ(code(bad_token), ErrorCode::kOutOfRange);
  Batch past_ctx;  // the model's context, not the cache's size, bounds positions
  past_ctx.add(1, static_cast<std::int32_t>(model.config().max_seq_len), 0, true);
  EXPECT_EQ(code(past_ctx), ErrorCode::kOutOfRange);
  Batch too_long;  // 17 positions need 2 blocks, the pool has 1
  for (std::int32_t i = 0; i < 17; ++i) too_long.add(1, i, 0, i == 16);
  const Status st = model.forward(too_long, cache, logits, pool);
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(st.message().find("2 KV blocks, 1 are free"), std::string::npos) << st.message();
  Batch two_blocks;  // two sequences of 4: a block each
  for (std::int32_t seq : {0, 1}) {
    for (std::int32_t i = 0; i < 4; ++i) two_blocks.add(1, i, seq, i == 3);
  }
  EXPECT_EQ(code(two_blocks), ErrorCode::kResourceExhausted);
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.pool().n_free(), 1);
}

}  // namespace
}  // namespace peregrine

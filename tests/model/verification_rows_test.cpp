// Batch invariance of speculative verification on every real model of the manifest: a forward of
// a chain of up to 7 rows (a verification of up to 6 drafted tokens) yields, bit for bit, the
// logits of the one-row decode forwards of the same tokens (model/llama_model.cpp
// kRowsAsDecode), so greedy speculative decoding cannot part from plain decoding even at a tie;
// so does each row of a token tree of up to 7 rows against the decode steps of its path.
// The prompt is real text (TinyStories), prefilled alike into both caches.
#include <gtest/gtest.h>

#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"
#include "real_models.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

class VerificationRowsTest : public ::testing::TestWithParam<std::string> {};

/// The TinyStories sample's token ids (prompt and continuations come from it).
std::vector<std::int32_t> story_ids(const Tokenizer& tok) {
  std::vector<std::int32_t> ids =
      tok.encode(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt"), tok.add_bos_default());
  EXPECT_GT(ids.size(), 60u);
  ids.resize(std::max<std::size_t>(ids.size(), 60));
  return ids;
}

/// Logits of one forward of `tokens` at positions p0, p0 + 1, ... (every row scored).
std::vector<float> forward_rows(const LlamaModel& model, KvCache& cache, const std::vector<std::int32_t>& tokens,
                                std::int32_t p0, ThreadPool& pool) {
  Batch batch;
  for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], p0 + static_cast<std::int32_t>(i), 0, true);
  std::vector<float> logits;
  const Status s = model.forward(batch, cache, logits, pool);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

/// Logits of the one-row decode steps of `tokens` after `prompt` (every step scored).
std::vector<float> decode_steps(const LlamaModel& model, const std::vector<std::int32_t>& prompt,
                                const std::vector<std::int32_t>& tokens, ThreadPool& pool) {
  const auto p0 = static_cast<std::int32_t>(prompt.size());
  KvCache cache = test::make_kv_cache(model.config(), p0 + static_cast<std::int64_t>(tokens.size()));
  forward_rows(model, cache, prompt, 0, pool);
  std::vector<float> logits;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> one = forward_rows(model, cache, {tokens[i]}, p0 + static_cast<std::int32_t>(i), pool);
    logits.insert(logits.end(), one.begin(), one.end());
  }
  return logits;
}

TEST_P(VerificationRowsTest, ChainsOfUpTo7RowsEqualDecodeStepsBitForBit) {
  const test::RealModelEntry entry = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const LlamaModel& model = *loaded.model;
  const std::vector<std::int32_t> ids = story_ids(*loaded.tokenizer);
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + 40);
  ThreadPool pool(2);
  const auto p0 = static_cast<std::int32_t>(prompt.size());
  for (const std::int32_t rows : {2, 5, 7}) {
    SCOPED_TRACE(rows);
    const std::vector<std::int32_t> chain(ids.begin() + p0, ids.begin() + p0 + rows);
    const std::vector<float> decoded = decode_steps(model, prompt, chain, pool);
    KvCache verify = test::make_kv_cache(model.config(), p0 + rows);
    forward_rows(model, verify, prompt, 0, pool);
    const std::vector<float> verified = forward_rows(model, verify, chain, p0, pool);
    ASSERT_EQ(verified.size(), decoded.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < decoded.size(); ++i) differing += verified[i] != decoded[i];
    EXPECT_EQ(differing, 0u) << "of " << decoded.size() << " logits";
  }
}

TEST_P(VerificationRowsTest, TreesOfUpTo7RowsEqualTheirPathsDecodeStepsBitForBit) {
  const test::RealModelEntry entry = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const LlamaModel& model = *loaded.model;
  const std::vector<std::int32_t> ids = story_ids(*loaded.tokenizer);
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + 40);
  const auto p0 = static_cast<std::int32_t>(prompt.size());
  // Two branches from the root: the text's own continuation a (4 deep) and another b (3 deep),
  // its rows interleaved as a drafter's levels come: root, a1, b1, a2, b2, a3.
  const std::vector<std::int32_t> a = {ids[40], ids[41], ids[42], ids[43]}, b = {ids[40], ids[50], ids[51]};
  struct Node {
    std::int32_t token, parent, depth, path_index;  // path_index: its step in a (>= 0) or b (< 0: -1 - step)
  };
  const std::vector<Node> tree = {{a[0], -1, 0, 0}, {a[1], 0, 1, 1}, {b[1], 0, 1, -2},
                                  {a[2], 1, 2, 2},  {b[2], 2, 2, -3}, {a[3], 3, 3, 3}};
  ThreadPool pool(2);
  KvCache cache = test::make_kv_cache(model.config(), p0 + static_cast<std::int64_t>(tree.size()));
  forward_rows(model, cache, prompt, 0, pool);
  Batch batch;
  for (const Node& node : tree) batch.add(node.token, p0 + node.depth, 0, true, node.parent);
  std::vector<float> verified;
  const Status s = model.forward(batch, cache, verified, pool);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<float> along_a = decode_steps(model, prompt, a, pool), along_b = decode_steps(model, prompt, b, pool);
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  ASSERT_EQ(verified.size(), tree.size() * vocab);
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const Node& node = tree[i];
    const float* want = node.path_index >= 0 ? &along_a[static_cast<std::size_t>(node.path_index) * vocab]
                                             : &along_b[static_cast<std::size_t>(-1 - node.path_index) * vocab];
    std::size_t differing = 0;
    for (std::size_t t = 0; t < vocab; ++t) differing += verified[i * vocab + t] != want[t];
    EXPECT_EQ(differing, 0u) << "tree row " << i << " (depth " << node.depth << ") of " << vocab << " logits";
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, VerificationRowsTest, ::testing::ValuesIn(test::real_model_names()),
                         test::real_model_test_name);

}  // namespace
}  // namespace peregrine

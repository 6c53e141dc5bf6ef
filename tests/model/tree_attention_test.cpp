// Token-tree attention in LlamaModel::forward (speculative verification; SpecInfer tree
// attention, Miao et al. 2024): one forward over a draft tree gives every node the logits of
// decoding its root→node path as a plain chain; KvCache::compact of an accepted path leaves
// the cache a plain decode of that path would have; trees mix with plain prefill chunks and
// decodes of other sequences in one batch; malformed trees are rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "peregrine/model/llama_model.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

// A tree row computes the same math as its chain counterpart in another order of f32
// operations: its masked keys add exact zeros, but its visible keys sit at other slots (so in
// other places of the 64-key tiles; the tree's slots 61..68 straddle slot 64) and the rows go
// through matmuls of other batch sizes, so each layer's attention output may differ by a few
// ulp (2^-23 ≈ 1.2e-7 relative). Through 3-5 layers of 64-term matmuls that grows to ~1e-6 of
// max|logit| at worst; measured: ~3e-7 (printed). 1e-4 keeps a 100x margin over that and is
// 200x or more below what a wrong mask does (dropping the mask moves the logits by 2e-2..4e-1 of
// max|logit|).
constexpr float kRelTol = 1e-4f;

// The draft tree of the tests: row 0 the root (the last accepted token, a plain row), rows
// 1..7 drafted nodes in 3 branches off the root of depths 3, 2 and 1, listed breadth-first
// so that siblings and cousins interleave. kParents[i]: the row of node i's parent.
//   0 ─┬─ 1 ─┬─ 4 ── 6
//      │     └─ 7
//      ├─ 2 ── 5
//      └─ 3
const std::vector<std::int32_t> kParents = {-1, 0, 0, 0, 1, 2, 4, 1};
const std::vector<std::int32_t> kTreeTokens = {261, 403, 17, 300, 99, 42, 378, 5};
constexpr std::int32_t kAcceptedLeaf = 6;  // the path 0 → 1 → 4 → 6 that compact keeps

// 61 prompt tokens: the tree's 8 slots 61..68 straddle the 64-key tile boundary.
std::vector<std::int32_t> prompt(std::int32_t n = 61) {
  std::vector<std::int32_t> p = {1};
  for (std::int32_t i = 1; i < n; ++i) p.push_back((i * 37 + 11) % 499 + 1);
  return p;
}

std::int32_t depth(std::int32_t node) { return node == 0 ? 0 : depth(kParents[static_cast<std::size_t>(node)]) + 1; }

// Rows of the root→node path, root first.
std::vector<std::int32_t> path_to(std::int32_t node) {
  std::vector<std::int32_t> path;
  for (std::int32_t r = node; r >= 0; r = kParents[static_cast<std::size_t>(r)]) path.insert(path.begin(), r);
  return path;
}

std::unique_ptr<LlamaModel> load(const std::string& name) {
  if (name == "stories260K") return test::load_stories260k();
  auto file = load_model_file(test::testdata_dir() + "/" + name);
  EXPECT_TRUE(file) << file.status().message() << " (run ctest -R make_test_models)";
  if (!file) return nullptr;
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::make_unique<LlamaModel>(std::move(*m)) : nullptr;
}

// stories260K (8 query heads sharing 4 KV heads of 8), a random-weight GQA model (4 query
// heads, 2 KV heads of 16, untied LM head), and two with sliding windows shorter than the
// prompt (Mistral-style 5 on every layer; Gemma 2's 6 on layers 0 and 2, soft-caps): a tree
// row's window counts its depth's position, not its slot.
const char* const kModels[] = {"stories260K", "llama2c-gqa-untied.bin", "gguf-f32-mistral-swa.gguf", "gguf-f32-gemma2.gguf"};

// Appends the tree for `seq` with its root at position p0, every row asking for logits.
void add_tree(Batch& batch, std::int32_t seq, std::int32_t p0) {
  const auto base = static_cast<std::int32_t>(batch.size());
  for (std::size_t i = 0; i < kParents.size(); ++i) {
    const std::int32_t parent = kParents[i] < 0 ? -1 : base + kParents[i];
    batch.add(kTreeTokens[i], p0 + depth(static_cast<std::int32_t>(i)), seq, true, parent);
  }
}

// Appends tokens as a plain chain of `seq` at positions p0.., logits on the last row only
// (or on every row).
void add_chain(Batch& batch, std::int32_t seq, std::int32_t p0, const std::vector<std::int32_t>& tokens, bool all_logits = false) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    batch.add(tokens[i], p0 + static_cast<std::int32_t>(i), seq, all_logits || i + 1 == tokens.size());
  }
}

std::vector<float> forward(const LlamaModel& model, const Batch& batch, KvCache& cache, ThreadPool& pool) {
  std::vector<float> logits;
  const Status st = model.forward(batch, cache, logits, pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

// Row `row` of logits [rows, vocab].
std::vector<float> logits_row(const std::vector<float>& logits, std::int64_t row, std::int64_t vocab) {
  return {logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab};
}

// max|a - b| / max|b|.
float rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f, m = 0.0f;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return d / m;
}

// Logits of the last token of `tokens` decoded as a plain chain at p0.. in sequence `dst`, a
// fork of `src` (its cached prefix shared); `dst` is freed afterwards.
std::vector<float> chain_logits(const LlamaModel& model, KvCache& cache, std::int32_t src, std::int32_t dst, std::int32_t p0,
                                const std::vector<std::int32_t>& tokens, ThreadPool& pool) {
  cache.fork(src, dst);
  Batch batch;
  add_chain(batch, dst, p0, tokens);
  auto logits = forward(model, batch, cache, pool);
  cache.free_sequence(dst);
  return logits;
}

std::vector<std::int32_t> path_tokens(std::int32_t node) {
  std::vector<std::int32_t> tokens;
  for (std::int32_t r : path_to(node)) tokens.push_back(kTreeTokens[static_cast<std::size_t>(r)]);
  return tokens;
}

// After a prompt prefill of seq 0, one tree forward gives every node the logits of its path as
// a chain; then compact keeps the accepted path and a decode step matches decoding that path.
void check_tree_matches_chains(const LlamaModel& model, DType kv_dtype, const std::string& what) {
  ThreadPool pool(2);
  const std::int64_t vocab = model.config().vocab_size;
  const auto p = prompt();
  const auto p0 = static_cast<std::int32_t>(p.size());
  KvCache cache = test::make_kv_cache(model.config(), 96, 3, 16, kv_dtype);
  Batch batch;
  add_chain(batch, 0, 0, p);
  forward(model, batch, cache, pool);

  std::vector<std::vector<float>> want;
  for (std::int32_t node = 0; node < static_cast<std::int32_t>(kParents.size()); ++node) {
    want.push_back(chain_logits(model, cache, 0, 1, p0, path_tokens(node), pool));
  }
  // The accepted path decoded alone, then one more token: the reference of compact + decode.
  cache.fork(0, 2);
  batch.clear();
  add_chain(batch, 2, p0, path_tokens(kAcceptedLeaf));
  forward(model, batch, cache, pool);
  const std::int32_t next_pos = p0 + depth(kAcceptedLeaf) + 1;
  batch.clear();
  batch.add(7, next_pos, 2, true);
  const auto want_next = forward(model, batch, cache, pool);

  batch.clear();
  add_tree(batch, 0, p0);
  const auto tree = forward(model, batch, cache, pool);
  ASSERT_EQ(tree.size(), kParents.size() * static_cast<std::size_t>(vocab));
  EXPECT_EQ(cache.length(0), p0 + static_cast<std::int64_t>(kParents.size()));
  float worst = 0.0f;
  for (std::size_t node = 0; node < kParents.size(); ++node) {
    const float d = rel_diff(logits_row(tree, static_cast<std::int64_t>(node), vocab), want[node]);
    EXPECT_LE(d, kRelTol) << what << " node " << node;
    worst = std::max(worst, d);
  }

  std::vector<std::int64_t> from;
  for (std::int32_t r : path_to(kAcceptedLeaf)) from.push_back(p0 + r);  // node r sits at slot p0 + r
  cache.compact(0, p0, from);
  EXPECT_EQ(cache.length(0), next_pos);
  batch.clear();
  batch.add(7, next_pos, 0, true);
  const float d_next = rel_diff(forward(model, batch, cache, pool), want_next);
  EXPECT_LE(d_next, kRelTol) << what << " decode after compact";
  std::printf("[ tree ] %-40s nodes vs chains max rel %.2e, decode after compact %.2e\n", what.c_str(), static_cast<double>(worst),
              static_cast<double>(d_next));
}

TEST(TreeAttention, EveryNodeGetsTheLogitsOfItsPathAsAChain) {
  for (const char* name : kModels) {
    const auto model = load(name);
    ASSERT_TRUE(model) << name;
    check_tree_matches_chains(*model, DType::kF32, std::string(name) + " f32 KV");
  }
}

TEST(TreeAttention, F16KvCacheMatchesChainsToo) {
  // The tree's and the chain's K/V rows agree to a few f32 ulp, far below an f16 step, so
  // both store the same f16 values (measured: the same ~3e-7 differences as with f32 K/V).
  for (const char* name : kModels) {
    const auto model = load(name);
    ASSERT_TRUE(model) << name;
    check_tree_matches_chains(*model, DType::kF16, std::string(name) + " f16 KV");
  }
}

TEST(TreeAttention, TreeMixesWithPlainPrefillAndDecodeInOneBatch) {
  // One batch: seq 1 continues its prompt with a 12-row chunk, seq 0 verifies a tree, seq 2
  // decodes one token; each gets the logits of running alone (the tree: of its own forward).
  for (const char* name : kModels) {
    const auto model = load(name);
    ASSERT_TRUE(model) << name;
    ThreadPool pool(2);
    const std::int64_t vocab = model->config().vocab_size;
    const auto p = prompt();
    const auto p0 = static_cast<std::int32_t>(p.size());
    const std::vector<std::int32_t> head(p.begin(), p.begin() + 30), chunk(p.begin() + 30, p.begin() + 42);
    auto prepare = [&](KvCache& cache) {
      Batch b;
      add_chain(b, 0, 0, p);
      add_chain(b, 1, 0, head);
      add_chain(b, 2, 0, p);
      forward(*model, b, cache, pool);
    };
    KvCache alone = test::make_kv_cache(model->config(), 96, 3);
    prepare(alone);
    Batch b;
    add_chain(b, 1, 30, chunk, true);
    const auto want_chunk = forward(*model, b, alone, pool);
    b.clear();
    add_tree(b, 0, p0);
    const auto want_tree = forward(*model, b, alone, pool);
    b.clear();
    b.add(9, p0, 2, true);
    const auto want_decode = forward(*model, b, alone, pool);

    KvCache mixed = test::make_kv_cache(model->config(), 96, 3);
    prepare(mixed);
    b.clear();
    add_chain(b, 1, 30, chunk, true);
    add_tree(b, 0, p0);
    b.add(9, p0, 2, true);
    const auto got = forward(*model, b, mixed, pool);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(21 * vocab));
    const auto n_chunk = static_cast<std::ptrdiff_t>(12 * vocab), n_tree = static_cast<std::ptrdiff_t>(8 * vocab);
    EXPECT_LE(rel_diff({got.begin(), got.begin() + n_chunk}, want_chunk), kRelTol) << name;
    EXPECT_LE(rel_diff({got.begin() + n_chunk, got.begin() + n_chunk + n_tree}, want_tree), kRelTol) << name;
    EXPECT_LE(rel_diff({got.begin() + n_chunk + n_tree, got.end()}, want_decode), kRelTol) << name;
    EXPECT_EQ(mixed.length(0), p0 + 8);
    EXPECT_EQ(mixed.length(1), 42);
    EXPECT_EQ(mixed.length(2), p0 + 1);
  }
}

TEST(TreeAttention, AllPlainParentsAreAPlainBatch) {
  // parents of all -1 (a tree batch builder with no branches) gives the plain batch's logits
  // bit for bit.
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(2);
  const auto p = prompt(20);
  Batch plain, flagged;
  add_chain(plain, 0, 0, p, true);
  flagged = plain;
  flagged.parents.assign(p.size(), -1);
  KvCache a = test::make_kv_cache(model->config(), 32), b = test::make_kv_cache(model->config(), 32);
  EXPECT_EQ(forward(*model, plain, a, pool), forward(*model, flagged, b, pool));
}

TEST(TreeAttention, MalformedTreesAreRejected) {
  const auto model = test::load_stories260k();
  ASSERT_TRUE(model);
  ThreadPool pool(1);
  KvCache cache = test::make_kv_cache(model->config(), 32, 2);
  std::vector<float> logits;
  auto rejected = [&](const Batch& b, const std::string& message) {
    const Status st = model->forward(b, cache, logits, pool);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << message;
    EXPECT_NE(st.message().find(message), std::string::npos) << st.message();
  };
  Batch good;
  add_tree(good, 0, 0);

  Batch short_parents = good;
  short_parents.parents.pop_back();
  rejected(short_parents, "batch.parents has 7 entries for 8 rows");
  Batch later_parent = good;
  later_parent.parents[3] = 5;
  rejected(later_parent, "row 3 has parent 5; a parent must be -1 or an earlier row");
  Batch self_parent = good;
  self_parent.parents[3] = 3;
  rejected(self_parent, "row 3 has parent 3;");
  Batch negative_parent = good;
  negative_parent.parents[3] = -2;
  rejected(negative_parent, "row 3 has parent -2;");
  Batch other_seq = good;  // row 8 of seq 1 claims a parent in seq 0
  other_seq.add(5, 1, 1, true, 0);
  rejected(other_seq, "row 8 of sequence 1 has parent row 0 of sequence 0");
  Batch wrong_depth = good;  // node 4 (child of 1, position 2) moved to position 3
  wrong_depth.positions[4] = 3;
  rejected(wrong_depth, "row 4 is at position 3, its parent row 1 at 1; a tree node sits one position after its parent");
  Batch plain_after_tree = good;  // a plain row follows the previous row of its sequence (node 7 at 2)
  plain_after_tree.add(5, 4, 0, true);
  rejected(plain_after_tree, "positions of sequence 0 are not consecutive");
  Batch split;  // another sequence's row between tree rows
  split.add(1, 0, 0, true);
  split.add(2, 0, 1, true);
  split.add(3, 1, 0, true, 0);
  rejected(split, "the rows of sequence 0 form a token tree and must be contiguous in the batch");
  Batch ahead;  // the root follows the cache's rule: at most cache.length(seq)
  add_tree(ahead, 0, 1);
  rejected(ahead, "sequence 0 starts at position 1, past its 0 cached positions");
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.pool().n_free(), cache.pool().n_blocks());

  Batch tree_then_plain = good;  // a plain row after the tree continues from the last row (node 7)
  tree_then_plain.add(5, 3, 0, true);
  EXPECT_TRUE(model->forward(tree_then_plain, cache, logits, pool).is_ok());
  EXPECT_EQ(cache.length(0), 9);
}

}  // namespace
}  // namespace peregrine

// PrefixCache: longest whole-block matches, partial matches, the max_blocks cap, hit counters,
// LRU eviction of leaves, and that eviction never frees a block a sequence still uses.
#include "peregrine/kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_test_shape.h"

namespace peregrine {
namespace {

constexpr std::int32_t kBlock = 4;

KvCache make_cache() {
  auto c = KvCache::create(test::kv_test_shape(), {16, kBlock, DType::kF32});
  EXPECT_TRUE(c) << c.status().message();
  return std::move(*c);
}

// Runs `tokens` as sequence `seq` (reserves its blocks, as a forward would), records its full
// blocks in the prefix cache, and frees the sequence: afterwards only the cache holds them.
std::vector<std::int32_t> compute_and_cache(KvCache& kv, PrefixCache& pc, std::int32_t seq,
                                            const std::vector<std::int32_t>& tokens) {
  EXPECT_TRUE(kv.reserve(seq, static_cast<std::int64_t>(tokens.size())).is_ok());
  kv.set_length(seq, static_cast<std::int64_t>(tokens.size()));
  const std::vector<std::int32_t> blocks(kv.block_table(seq).begin(), kv.block_table(seq).end());
  pc.insert(tokens, blocks);
  kv.free_sequence(seq);
  return blocks;
}

// match() then hand the references straight back: how many blocks matched.
std::size_t probe(KvCache& kv, PrefixCache& pc, const std::vector<std::int32_t>& tokens) {
  const auto blocks = pc.match(tokens, 100);
  for (std::int32_t b : blocks) kv.pool().unref(b);
  return blocks.size();
}

const std::vector<std::int32_t> kP1 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2
const std::vector<std::int32_t> kP2 = {9, 10, 11, 12};
const std::vector<std::int32_t> kP3 = {1, 2, 3, 4, 20, 21, 22, 23};  // shares P1's first block

TEST(PrefixCache, MatchesWholeBlocksOfTheLongestCachedPrefix) {
  KvCache kv = make_cache();
  PrefixCache pc(kv);
  const auto blocks = compute_and_cache(kv, pc, 0, kP1);
  EXPECT_EQ(pc.n_cached_blocks(), 2);  // the partial third block is not cached
  EXPECT_EQ(kv.pool().n_free(), 14);
  EXPECT_EQ(pc.n_evictable_blocks(), 2);

  const auto hit = pc.match(kP1, (static_cast<std::int64_t>(kP1.size()) - 1) / kBlock);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], blocks[0]);
  EXPECT_EQ(hit[1], blocks[1]);
  EXPECT_EQ(kv.pool().ref_count(hit[0]), 2);  // cache + caller
  EXPECT_EQ(pc.n_evictable_blocks(), 0);
  kv.attach_prefix(1, hit, 8);
  EXPECT_EQ(kv.length(1), 8);

  // Partial matches: the first block only, or nothing.
  EXPECT_EQ(probe(kv, pc, {1, 2, 3, 4, 5, 6, 7, 99, 9}), 1u);
  EXPECT_EQ(probe(kv, pc, {1, 2, 3, 5, 5, 6, 7, 8}), 0u);
  EXPECT_EQ(probe(kv, pc, {1, 2, 3}), 0u);  // shorter than a block
  // The cap: one block at most.
  const auto capped = pc.match(kP1, 1);
  ASSERT_EQ(capped.size(), 1u);
  kv.pool().unref(capped[0]);
  EXPECT_TRUE(pc.match(kP1, 0).empty());

  // Counters: every match's tokens are queried; hits are whole matched blocks.
  EXPECT_EQ(pc.tokens_queried(), 10 + 9 + 8 + 3 + 10 + 10);
  EXPECT_EQ(pc.tokens_hit(), 8 + 4 + 0 + 0 + 4 + 0);
  kv.free_sequence(1);
  EXPECT_EQ(kv.pool().ref_count(blocks[0]), 1);
}

TEST(PrefixCache, InsertAdoptsLiveBlocksOverCacheOnlyCopies) {
  KvCache kv = make_cache();
  PrefixCache pc(kv);
  const auto first = compute_and_cache(kv, pc, 0, kP1);
  // Sequence 3 attaches the cached blocks; sequence 1 computes the same prompt again.
  const std::vector<std::int32_t> held = pc.match(kP1, 2);
  ASSERT_EQ(held, std::vector<std::int32_t>(first.begin(), first.begin() + 2));  // the 2 full blocks
  kv.attach_prefix(3, held, 8);
  ASSERT_TRUE(kv.reserve(1, 10).is_ok());
  const std::vector<std::int32_t> dup(kv.block_table(1).begin(), kv.block_table(1).end());
  // While sequence 3 uses the cached copies, sequence 1's duplicates stay private.
  pc.insert(kP1, dup);
  EXPECT_EQ(pc.n_cached_blocks(), 2);
  EXPECT_EQ(kv.pool().ref_count(dup[0]), 1);
  EXPECT_EQ(kv.pool().ref_count(first[0]), 2);
  // Once only the cache holds them, the nodes adopt sequence 1's blocks and free the copies.
  kv.free_sequence(3);
  const std::int32_t free_before = kv.pool().n_free();
  pc.insert(kP1, dup);
  EXPECT_EQ(pc.n_cached_blocks(), 2);
  EXPECT_EQ(kv.pool().ref_count(dup[0]), 2);
  EXPECT_EQ(kv.pool().ref_count(dup[1]), 2);
  EXPECT_EQ(kv.pool().ref_count(first[0]), 0);
  EXPECT_EQ(kv.pool().n_free(), free_before + 2);
  // A branch off the first block adds one node referencing the new block.
  ASSERT_TRUE(kv.reserve(2, 8).is_ok());
  const std::vector<std::int32_t> branch(kv.block_table(2).begin(), kv.block_table(2).end());
  pc.insert(kP3, branch);
  EXPECT_EQ(pc.n_cached_blocks(), 3);
  EXPECT_EQ(kv.pool().ref_count(branch[0]), 1);  // P3's first block duplicates P1's node
  EXPECT_EQ(kv.pool().ref_count(branch[1]), 2);
  // blocks.size() bounds the insert too.
  pc.insert(kP2, {});
  EXPECT_EQ(pc.n_cached_blocks(), 3);
  kv.free_sequence(1);
  kv.free_sequence(2);
  pc.clear();
  EXPECT_EQ(pc.n_cached_blocks(), 0);
  EXPECT_EQ(kv.pool().n_free(), 16);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  KvCache kv = make_cache();
  PrefixCache pc(kv);
  compute_and_cache(kv, pc, 0, kP1);  // root → A(1..4) → B(5..8)
  compute_and_cache(kv, pc, 1, kP2);  // root → C(9..12)
  compute_and_cache(kv, pc, 2, kP3);  //         A → D(20..23)
  EXPECT_EQ(pc.n_cached_blocks(), 4);
  EXPECT_EQ(kv.pool().n_free(), 12);
  EXPECT_EQ(probe(kv, pc, kP2), 1u);  // C used
  EXPECT_EQ(probe(kv, pc, kP1), 2u);  // A, B used: D is now the least recent
  EXPECT_EQ(pc.evict(1), 1);
  EXPECT_EQ(kv.pool().n_free(), 13);
  EXPECT_EQ(probe(kv, pc, kP3), 1u);  // D gone, A left (and touched)
  EXPECT_EQ(pc.evict(1), 1);          // C: older than B
  EXPECT_EQ(probe(kv, pc, kP2), 0u);
  EXPECT_EQ(pc.evict(1), 1);          // B: A has a child until then
  EXPECT_EQ(probe(kv, pc, kP1), 1u);
  EXPECT_EQ(pc.evict(5), 1);          // A, then nothing is left
  EXPECT_EQ(pc.n_cached_blocks(), 0);
  EXPECT_EQ(kv.pool().n_free(), 16);
  EXPECT_EQ(pc.evict(1), 0);
}

TEST(PrefixCache, NeverEvictsBlocksASequenceUses) {
  KvCache kv = make_cache();
  PrefixCache pc(kv);
  compute_and_cache(kv, pc, 0, kP1);
  compute_and_cache(kv, pc, 1, kP2);
  const auto held = pc.match(kP1, 2);  // a running sequence holds A and B
  ASSERT_EQ(held.size(), 2u);
  kv.attach_prefix(7, held, 8);
  EXPECT_EQ(pc.n_evictable_blocks(), 1);  // C only
  EXPECT_EQ(pc.evict(10), 1);
  EXPECT_EQ(pc.n_cached_blocks(), 2);
  EXPECT_EQ(kv.pool().ref_count(held[0]), 2);
  EXPECT_EQ(kv.pool().ref_count(held[1]), 2);

  // A sequence holding only the child (B) also pins the parent A, which the cache alone holds.
  kv.free_sequence(7);
  kv.pool().ref(held[1]);
  kv.attach_prefix(8, std::vector<std::int32_t>{held[1]}, 4);
  EXPECT_EQ(pc.n_evictable_blocks(), 0);
  EXPECT_EQ(pc.evict(10), 0);
  kv.free_sequence(8);
  EXPECT_EQ(pc.n_evictable_blocks(), 2);
  EXPECT_EQ(pc.evict(10), 2);
  EXPECT_EQ(kv.pool().n_free(), 16);
}

}  // namespace
}  // namespace peregrine

// KV cache groups for sliding-window layers: how layers group (Gemma 2 / 3, Mistral, Llama),
// that a window group releases the blocks no later query sees while a full group keeps them,
// that a long decode holds at most window / block_size + 1 blocks in a window group, that
// forks, followers and the prefix cache carry released entries, and that a prefix match stops
// where a window group's blocks are gone.
#include <gtest/gtest.h>

#include <vector>

#include "peregrine/kv/kv_cache.h"
#include "peregrine/kv/kv_layer_groups.h"
#include "peregrine/kv/prefix_cache.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

constexpr std::int32_t kBlock = 4;
constexpr std::int64_t kWindow = 8;

// 4 layers: 0 and 2 attend through a window of 8 positions, 1 and 3 fully (Gemma 2's pattern).
KvShape alternating_shape() { return KvShape{4, 1, 32, {kWindow, 0, kWindow, 0}}; }

KvCache make(std::int32_t n_blocks) {
  auto c = KvCache::create(alternating_shape(), {n_blocks, kBlock, DType::kF32});
  EXPECT_TRUE(c) << c.status().message();
  return std::move(*c);
}

std::vector<float> row_of(std::int32_t seq, std::int64_t layer, std::int64_t pos) {
  std::vector<float> r(32);
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(seq * 10000 + layer * 1000 + pos) + 0.5f * static_cast<float>(i);
  return r;
}

// Reserves and writes positions [begin, end) of `seq` in every layer, as a forward would.
void compute(KvCache& c, std::int32_t seq, std::int64_t begin, std::int64_t end) {
  ASSERT_TRUE(c.reserve(seq, end).is_ok());
  for (std::int64_t p = begin; p < end; ++p) {
    for (std::int64_t l = 0; l < 4; ++l) {
      const std::vector<float> k = row_of(seq, l, p);
      c.write(seq, l, p, k.data(), k.data());
    }
  }
  c.set_length(seq, end);
}

// Layer `layer` of `seq` holds the rows `writer` computed at positions [begin, end).
void expect_rows(const KvCache& c, std::int32_t seq, std::int32_t writer, std::int64_t layer, std::int64_t begin, std::int64_t end) {
  std::vector<float> got(32);
  for (std::int64_t p = begin; p < end; ++p) {
    dequantize(DType::kF32, c.k_view(seq, layer).row(p), got);
    ASSERT_EQ(got, row_of(writer, layer, p)) << "layer " << layer << " position " << p;
  }
}

TEST(KvLayerGroups, GroupLayersOfOneWindowInEqualSizes) {
  std::vector<std::int64_t> gemma3(18);
  for (std::size_t l = 0; l < gemma3.size(); ++l) gemma3[l] = l % 6 == 5 ? 0 : 512;  // 3 global, 15 local
  const KvLayerGroups g3 = kv_layer_groups(KvShape{18, 1, 256, gemma3});
  EXPECT_EQ(g3.layers_per_group, 3);
  EXPECT_EQ(g3.group_windows, (std::vector<std::int64_t>{0, 512, 512, 512, 512, 512}));
  EXPECT_EQ(g3.layer_group[5], 0);
  EXPECT_EQ(g3.layer_group[17], 0);
  EXPECT_EQ(g3.layer_slot[17], 2);
  // The local layers fill groups 1..5 in order: {0, 1, 2}, {3, 4, 6}, {7, 8, 9}, ...
  EXPECT_EQ(g3.layer_group[0], 1);
  EXPECT_EQ(g3.layer_group[3], 2);
  EXPECT_EQ(g3.layer_slot[3], 0);
  EXPECT_EQ(g3.layer_group[6], 2);
  EXPECT_EQ(g3.layer_slot[6], 2);
  EXPECT_EQ(g3.layer_group[16], 5);

  const KvLayerGroups g2 = kv_layer_groups(alternating_shape());
  EXPECT_EQ(g2.layers_per_group, 2);
  EXPECT_EQ(g2.group_windows, (std::vector<std::int64_t>{0, kWindow}));
  EXPECT_EQ(g2.layer_group, (std::vector<std::int32_t>{1, 0, 1, 0}));

  const KvLayerGroups mistral = kv_layer_groups(KvShape{4, 1, 32, {4096, 4096, 4096, 4096}});
  EXPECT_EQ(mistral.n_groups(), 1);
  EXPECT_EQ(mistral.group_windows[0], 4096);
  const KvLayerGroups llama = kv_layer_groups(KvShape{5, 1, 32});
  EXPECT_EQ(llama.n_groups(), 1);
  EXPECT_EQ(llama.layers_per_group, 5);
}

TEST(SlidingWindowKv, AWindowGroupReleasesWhatNoLaterQuerySeesAndAFullGroupKeepsAll) {
  KvCache c = make(8);  // 8 blocks of every layer: 16 group blocks of 2 layers
  ASSERT_EQ(c.n_groups(), 2);
  EXPECT_EQ(c.pool().n_blocks(), 16);
  compute(c, 0, 0, 20);  // 5 blocks in each group
  EXPECT_EQ(c.pool().n_free(), 6);
  // A query at position 20 sees [13, 20]: blocks 0..2 (positions 0..11) are out of its window.
  c.release_behind_window(0, 20);
  EXPECT_EQ(c.held_blocks(0, 0), 5);  // the full group
  EXPECT_EQ(c.held_blocks(0, 1), 2);
  EXPECT_EQ(c.pool().n_free(), 9);
  EXPECT_EQ(c.block_table(0, 1)[0], kReleasedBlock);
  for (std::int64_t l : {1, 3}) expect_rows(c, 0, 0, l, 0, 20);
  for (std::int64_t l : {0, 2}) expect_rows(c, 0, 0, l, 12, 20);
  // The freed blocks serve another sequence; the window rows of sequence 0 are untouched.
  compute(c, 1, 0, 12);
  for (std::int64_t l : {0, 2}) expect_rows(c, 0, 0, l, 12, 20);
  for (std::int64_t l = 0; l < 4; ++l) expect_rows(c, 1, 1, l, 0, 12);
  // Growing, truncating and forking keep the released entries released.
  compute(c, 0, 20, 24);
  c.truncate(0, 21);
  EXPECT_EQ(c.held_blocks(0, 1), 3);
  c.fork(0, 2);
  c.free_sequence(0);
  c.free_sequence(1);
  for (std::int64_t l : {0, 2}) expect_rows(c, 2, 0, l, 12, 21);
  c.free_sequence(2);
  EXPECT_EQ(c.pool().n_free(), 16);
}

TEST(SlidingWindowKv, ALongDecodeHoldsAtMostWindowOverBlockSizePlusOneBlocks) {
  KvCache c = make(64);
  compute(c, 0, 0, 5);  // a prompt
  for (std::int64_t p = 5; p < 200; ++p) {
    c.release_behind_window(0, p);  // positions < p are committed
    compute(c, 0, p, p + 1);
    ASSERT_LE(c.held_blocks(0, 1), kWindow / kBlock + 1) << "at position " << p;
    ASSERT_EQ(c.held_blocks(0, 0), blocks_for_tokens(p + 1, kBlock));
  }
  for (std::int64_t l : {0, 2}) expect_rows(c, 0, 0, l, 199 - kWindow + 1, 200);
  for (std::int64_t l : {1, 3}) expect_rows(c, 0, 0, l, 0, 200);
}

TEST(SlidingWindowKv, AFollowerTakesReleasedEntries) {
  KvCache leader = make(8), follower = make(8);
  leader.record_for_followers();
  compute(leader, 3, 0, 20);
  leader.release_behind_window(3, 20);
  const std::int32_t seqs[] = {3};
  follower.follow(leader.take_follower_update(seqs));
  for (std::int32_t g = 0; g < 2; ++g) {
    EXPECT_EQ(std::vector<std::int32_t>(follower.block_table(3, g).begin(), follower.block_table(3, g).end()),
              std::vector<std::int32_t>(leader.block_table(3, g).begin(), leader.block_table(3, g).end()));
  }
  EXPECT_EQ(leader.blocks_by_position(3).size(), 10u);
  EXPECT_EQ(leader.blocks_by_position(3)[1], kReleasedBlock);  // block 0 of the window group
}

TEST(SlidingWindowKv, APrefixMatchKeepsTheWindowBlocksAndStopsWhereTheyAreGone) {
  KvCache c = make(16);
  PrefixCache pc(c);
  std::vector<std::int32_t> tokens(24);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(100 + i);
  compute(c, 0, 0, 24);
  pc.insert(tokens, c.blocks_by_position(0));  // before the window releases: the cache keeps them
  c.release_behind_window(0, 24);
  c.free_sequence(0);
  EXPECT_EQ(pc.n_cached_blocks(), 12);
  EXPECT_EQ(pc.n_evictable_blocks(), 12);
  // Five of six blocks match (one prompt token is left to compute): the next position, 20,
  // sees [13, 20], so the window group needs blocks 3 and 4 only.
  const std::vector<std::int32_t> hit = pc.match(tokens, 5);
  ASSERT_EQ(hit.size(), 10u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NE(hit[2 * i], kReleasedBlock) << i;
  EXPECT_EQ(hit[1], kReleasedBlock);
  EXPECT_EQ(hit[5], kReleasedBlock);
  EXPECT_NE(hit[7], kReleasedBlock);
  c.attach_prefix(1, hit, 20);
  for (std::int64_t l : {1, 3}) expect_rows(c, 1, 0, l, 0, 20);
  for (std::int64_t l : {0, 2}) expect_rows(c, 1, 0, l, 12, 20);
  c.free_sequence(1);

  // A sequence that released its window blocks before offering them: the window group's
  // blocks of the early positions are missing, so only a prefix whose window is whole matches.
  KvCache d = make(16);
  PrefixCache late(d);
  compute(d, 0, 0, 24);
  d.release_behind_window(0, 24);  // blocks 0..3 of the window group go
  late.insert(tokens, d.blocks_by_position(0));
  d.free_sequence(0);
  const std::vector<std::int32_t> tail = late.match(tokens, 5);  // position 20 needs blocks 3, 4
  EXPECT_EQ(tail.size(), 0u);
  const std::vector<std::int32_t> whole = late.match(tokens, 6);  // position 24 needs 4, 5: held
  EXPECT_EQ(whole.size(), 12u);
  for (std::int32_t id : whole) {
    if (id != kReleasedBlock) d.pool().unref(id);
  }
}

}  // namespace
}  // namespace peregrine

// KvCache: creation errors, reserve (all or nothing), copy-on-write of shared blocks, truncate
// and free returning blocks, and rows stored in each KV dtype.
#include "peregrine/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "kv/kv_test_shape.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

KvCache make(std::int32_t n_blocks, std::int32_t block_size, DType dtype = DType::kF32) {
  auto c = KvCache::create(test::kv_test_shape(), {n_blocks, block_size, dtype});
  EXPECT_TRUE(c) << c.status().message();
  return std::move(*c);
}

// A recognizable K row of 32 values for (seq, pos); V is its negation.
std::vector<float> row_of(std::int32_t seq, std::int64_t pos) {
  std::vector<float> r(32);
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(seq * 1000 + pos) + 0.25f * static_cast<float>(i);
  return r;
}

void write_rows(KvCache& c, std::int32_t seq, std::int64_t begin, std::int64_t end) {
  for (std::int64_t p = begin; p < end; ++p) {
    auto k = row_of(seq, p);
    std::vector<float> v(k.size());
    for (std::size_t i = 0; i < k.size(); ++i) v[i] = -k[i];
    for (std::int64_t l = 0; l < 2; ++l) c.write(seq, l, p, k.data(), v.data());
  }
}

std::vector<float> read_row(const KvLayerView& view, std::int64_t pos) {
  std::vector<float> r(32);
  dequantize(view.dtype, view.row(pos), r);
  return r;
}

// Positions [begin, end) of `seq` hold the rows written as `writer`'s (exactly, f32).
void expect_rows(const KvCache& c, std::int32_t seq, std::int32_t writer, std::int64_t begin, std::int64_t end) {
  for (std::int64_t l = 0; l < 2; ++l) {
    for (std::int64_t p = begin; p < end; ++p) {
      const auto k = row_of(writer, p);
      EXPECT_EQ(read_row(c.k_view(seq, l), p), k) << "seq " << seq << " layer " << l << " pos " << p;
      const auto v = read_row(c.v_view(seq, l), p);
      for (std::size_t i = 0; i < k.size(); ++i) ASSERT_EQ(v[i], -k[i]);
    }
  }
}

TEST(KvCache, SizesAndParsing) {
  const KvShape c = test::kv_test_shape();
  EXPECT_EQ(kv_block_bytes(c, 16, DType::kF32), 2 * 2 * 16 * 32 * 4);
  EXPECT_EQ(kv_block_bytes(c, 16, DType::kF16), 2 * 2 * 16 * 32 * 2);
  EXPECT_EQ(kv_block_bytes(c, 16, DType::kQ8_0), 2 * 2 * 16 * 34);
  for (DType t : {DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    EXPECT_EQ(kv_block_bytes(c, 16, t), 2 * 2 * 16 * (4 + 32)) << dtype_name(t);  // f32 scale + a byte per value
  }
  EXPECT_EQ(blocks_for_tokens(0, 16), 0);
  EXPECT_EQ(blocks_for_tokens(1, 16), 1);
  EXPECT_EQ(blocks_for_tokens(16, 16), 1);
  EXPECT_EQ(blocks_for_tokens(17, 16), 2);
  EXPECT_EQ(*parse_kv_type("f32"), DType::kF32);
  EXPECT_EQ(*parse_kv_type("f16"), DType::kF16);
  EXPECT_EQ(*parse_kv_type("q8_0"), DType::kQ8_0);
  EXPECT_EQ(*parse_kv_type("i8"), DType::kI8);
  EXPECT_EQ(*parse_kv_type("f8_e4m3"), DType::kF8E4M3);
  EXPECT_EQ(*parse_kv_type("f8_e5m2"), DType::kF8E5M2);
  for (const char* name : {"q4_0", "bf16", "int", "f8"}) {
    const auto bad = parse_kv_type(name);
    ASSERT_FALSE(bad) << name;
    EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2"), std::string::npos) << bad.status().message();
  }
}

TEST(KvCache, CreateRejectsBadOptions) {
  const KvShape c = test::kv_test_shape();
  auto code = [&](const KvShape& cfg, KvCacheOptions o) { return KvCache::create(cfg, o).status().code(); };
  EXPECT_EQ(code(c, {0, 16, DType::kF32}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(c, {4, 0, DType::kF32}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(c, {4, 16, DType::kBF16}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(c, {4, 16, DType::kQ4_0}), ErrorCode::kInvalidArgument);
  KvShape odd = c;
  odd.n_kv_heads = 3;  // kv_dim 48: not whole q8_0 blocks
  const auto q8 = KvCache::create(odd, {4, 16, DType::kQ8_0});
  ASSERT_FALSE(q8);
  EXPECT_EQ(q8.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(q8.status().message().find("multiple of 32"), std::string::npos) << q8.status().message();
  EXPECT_TRUE(KvCache::create(odd, {4, 16, DType::kF16}));
  EXPECT_TRUE(KvCache::create(odd, {4, 16, DType::kI8}));  // per-token scales: any row length
  EXPECT_EQ(code(c, {4, 16, DType::kInt}), ErrorCode::kInvalidArgument);
  // 2^31 blocks of 2^20 positions: petabytes.
  const auto huge = KvCache::create(c, {std::numeric_limits<std::int32_t>::max(), 1 << 20, DType::kF32});
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.status().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(huge.status().message().find("GiB"), std::string::npos) << huge.status().message();
}

TEST(KvCache, ReserveIsAllOrNothing) {
  KvCache c = make(4, 16);
  EXPECT_FALSE(c.has_sequence(0));
  EXPECT_EQ(c.length(0), 0);
  EXPECT_TRUE(c.block_table(0).empty());
  EXPECT_EQ(c.blocks_needed(0, 40), 3);
  ASSERT_TRUE(c.reserve(0, 40).is_ok());
  EXPECT_TRUE(c.has_sequence(0));
  EXPECT_EQ(c.block_table(0).size(), 3u);
  EXPECT_EQ(c.length(0), 0);  // reserved, not yet written
  EXPECT_EQ(c.pool().n_free(), 1);
  EXPECT_EQ(c.blocks_needed(0, 48), 0);
  EXPECT_EQ(c.blocks_needed(0, 49), 1);

  const Status st = c.reserve(1, 20);  // 2 blocks, 1 free
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(st.message().find("needs 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("1 are free"), std::string::npos) << st.message();
  EXPECT_FALSE(c.has_sequence(1));
  EXPECT_EQ(c.pool().n_free(), 1);
  EXPECT_EQ(c.reserve(0, 65).code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(c.block_table(0).size(), 3u);
  EXPECT_TRUE(c.reserve(1, 16).is_ok());
  EXPECT_EQ(c.pool().n_free(), 0);
}

// Largest |stored - written| for value x of a row whose largest magnitude is `absmax`: half a
// quantization step of each format's round-to-nearest.
float round_trip_tolerance(DType dtype, float x, float absmax) {
  const float d = absmax / 127.0f;
  switch (dtype) {
    case DType::kF32: return 0.0f;
    case DType::kF16: return absmax / 2048.0f;  // 11 significant bits
    // Half a step d = absmax/127, plus d's own f16 rounding (2^-11 relative) times |q| <= 127.
    case DType::kQ8_0: return d * (0.5f + 127.0f / 2048.0f);
    case DType::kI8: return d * 0.5f * 1.0001f;  // f32 scale: half a step, plus the product's rounding
    // x / s with s = absmax / fp8_max: half an ulp of 3 (E4M3) or 2 (E5M2) mantissa bits
    // relative to |x|, or half the subnormal quantum 2^-9 · s (E4M3) / 2^-16 · s (E5M2).
    case DType::kF8E4M3: return std::fabs(x) / 16.0f + absmax / 448.0f / 1024.0f;
    case DType::kF8E5M2: return std::fabs(x) / 8.0f + absmax / 57344.0f / 131072.0f;
    default: return NAN;
  }
}

TEST(KvCache, RowsRoundTripInEveryDtype) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    KvCache c = make(3, 5, dtype);  // blocks of 5: rows cross block boundaries
    EXPECT_EQ(c.dtype(), dtype);
    EXPECT_EQ(c.kv_dim(), 32);
    ASSERT_TRUE(c.reserve(7, 12).is_ok());
    write_rows(c, 7, 0, 12);
    c.set_length(7, 12);
    EXPECT_EQ(c.length(7), 12);
    for (std::int64_t p = 0; p < 12; ++p) {
      const auto want = row_of(7, p), got = read_row(c.k_view(7, 1), p);
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], round_trip_tolerance(dtype, want[i], std::fabs(want.back()))) << dtype_name(dtype) << " pos " << p;
      }
    }
  }
}

TEST(KvCache, RowsReadOutLandBitForBitInACacheOfOtherBlocks) {
  for (DType dtype : {DType::kF32, DType::kQ8_0, DType::kI8}) {
    KvCache from = make(3, 5, dtype), to = make(4, 4, dtype);  // other block size, other sequence id
    ASSERT_TRUE(from.reserve(7, 12).is_ok());
    write_rows(from, 7, 0, 12);
    ASSERT_TRUE(to.reserve(2, 12).is_ok());
    const auto row = static_cast<std::size_t>(from.row_bytes());
    std::vector<std::uint8_t> shipped(2 * 9 * row);  // positions [3, 12): K rows, then V rows
    for (std::int64_t layer = 0; layer < 2; ++layer) {
      from.read_rows(7, layer, 3, 9, shipped.data());
      to.write_rows(2, layer, 3, 9, shipped.data());
      for (std::int64_t p = 3; p < 12; ++p) {
        EXPECT_EQ(std::memcmp(to.k_view(2, layer).row(p), from.k_view(7, layer).row(p), row), 0) << dtype_name(dtype) << " " << p;
        EXPECT_EQ(std::memcmp(to.v_view(2, layer).row(p), from.v_view(7, layer).row(p), row), 0) << dtype_name(dtype) << " " << p;
      }
    }
  }
}

TEST(KvCache, AFollowerHoldsTheSameBlocksAfterFreesAndCopiesOnWrite) {
  KvCache leader = make(6, 4), follower = make(6, 4);
  leader.record_for_followers();
  ASSERT_TRUE(leader.reserve(1, 8).is_ok());  // two blocks
  write_rows(leader, 1, 0, 8);
  leader.set_length(1, 8);
  leader.fork(1, 2);                           // sequence 2 shares them
  ASSERT_TRUE(leader.reserve(2, 10).is_ok());  // a third block of its own
  leader.free_sequence(1);
  ASSERT_TRUE(leader.reserve(3, 4).is_ok());   // a block freed by sequence 1 goes to sequence 3
  const std::int32_t seqs[] = {2, 3};
  KvCache::FollowerUpdate u = leader.take_follower_update(seqs);
  EXPECT_EQ(u.freed, std::vector<std::int32_t>{1});
  ASSERT_EQ(u.tables.size(), 2u);
  // The follower ran the same forward before (sequence 1's rows); it follows, then both write.
  ASSERT_TRUE(follower.reserve(1, 8).is_ok());
  write_rows(follower, 1, 0, 8);
  follower.follow(u);
  EXPECT_FALSE(follower.has_sequence(1));
  for (std::int32_t seq : seqs) {
    EXPECT_EQ(std::vector<std::int32_t>(follower.block_table(seq).begin(), follower.block_table(seq).end()),
              std::vector<std::int32_t>(leader.block_table(seq).begin(), leader.block_table(seq).end()));
    EXPECT_EQ(follower.length(seq), leader.length(seq));
  }
  EXPECT_TRUE(follower.reserve(2, 10).is_ok());  // covered: nothing allocated
  EXPECT_EQ(follower.reserve(2, 13).code(), ErrorCode::kInternal);
  for (std::int64_t p = 0; p < 8; ++p) EXPECT_EQ(read_row(follower.k_view(2, 1), p), read_row(leader.k_view(2, 1), p)) << p;
  // A copy on write in the leader is replayed by the follower.
  write_rows(leader, 2, 8, 9);
  write_rows(follower, 2, 8, 9);
  leader.set_length(2, 9);
  leader.fork(2, 4);
  ASSERT_TRUE(leader.reserve(4, 10).is_ok());  // position 9 is in sequence 2's third block: copied
  const std::int32_t forked[] = {4};
  const KvCache::FollowerUpdate v = leader.take_follower_update(forked);
  ASSERT_EQ(v.copies.size(), 1u);
  follower.follow(v);
  EXPECT_EQ(follower.block_table(4).back(), leader.block_table(4).back());
  EXPECT_EQ(read_row(follower.k_view(4, 0), 8), read_row(leader.k_view(4, 0), 8));
}

TEST(KvCache, PerTokenScaleFollowsEachRow) {
  // i8 / f8 keep one scale per position's row: rows of absmax 10^-6 .. 10^5 side by side each
  // round-trip within half a step of their own scale, and values down to 2^-31 of a row's
  // absmax reach the FP8 subnormals and underflow to zero within the same bound.
  for (DType dtype : {DType::kI8, DType::kF8E4M3, DType::kF8E5M2}) {
    KvCache c = make(2, 8, dtype);
    ASSERT_TRUE(c.reserve(0, 12).is_ok());
    std::vector<std::vector<float>> rows;
    for (std::int64_t p = 0; p < 12; ++p) {
      std::vector<float> r(32);
      for (std::size_t i = 0; i < r.size(); ++i) r[i] = (i % 2 ? -1.0f : 1.0f) * std::ldexp(std::pow(10.0f, static_cast<float>(p - 6)), -static_cast<int>(i));
      for (std::int64_t l = 0; l < 2; ++l) c.write(0, l, p, r.data(), r.data());
      rows.push_back(r);
    }
    c.set_length(0, 12);
    for (std::int64_t p = 0; p < 12; ++p) {
      const auto& want = rows[static_cast<std::size_t>(p)];
      const auto got = read_row(c.v_view(0, 1), p);
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], round_trip_tolerance(dtype, want[i], std::fabs(want[0]))) << dtype_name(dtype) << " pos " << p << " i " << i;
      }
    }
  }
}

TEST(KvCache, WriteIntoASharedBlockCopiesItFirst) {
  KvCache c = make(6, 16);
  ASSERT_TRUE(c.reserve(0, 20).is_ok());  // blocks b0, b1
  write_rows(c, 0, 0, 20);
  c.set_length(0, 20);
  const std::vector<std::int32_t> shared(c.block_table(0).begin(), c.block_table(0).end());
  for (std::int32_t b : shared) c.pool().ref(b);  // the references attach_prefix takes over
  c.attach_prefix(1, shared, 20);
  EXPECT_EQ(c.length(1), 20);
  EXPECT_EQ(c.pool().ref_count(shared[1]), 2);
  expect_rows(c, 1, 0, 0, 20);

  // Sequence 1 writes position 20, inside the shared block b1: it gets a private copy.
  EXPECT_EQ(c.blocks_needed(1, 21), 1);
  ASSERT_TRUE(c.reserve(1, 21).is_ok());
  EXPECT_EQ(c.block_table(1)[0], shared[0]);  // untouched by [20, 21): still shared
  EXPECT_NE(c.block_table(1)[1], shared[1]);
  EXPECT_EQ(c.pool().ref_count(shared[0]), 2);
  EXPECT_EQ(c.pool().ref_count(shared[1]), 1);
  write_rows(c, 1, 20, 21);
  c.set_length(1, 21);
  expect_rows(c, 1, 0, 0, 20);  // the copy carried positions 16..19
  expect_rows(c, 1, 1, 20, 21);
  expect_rows(c, 0, 0, 0, 20);  // sequence 0 unchanged

  // Sequence 0 now owns b1 alone: no copy, and its write leaves sequence 1's copy intact.
  EXPECT_EQ(c.blocks_needed(0, 21), 0);
  ASSERT_TRUE(c.reserve(0, 21).is_ok());
  EXPECT_EQ(c.block_table(0)[1], shared[1]);
  write_rows(c, 0, 20, 21);
  expect_rows(c, 1, 1, 20, 21);
  expect_rows(c, 0, 0, 0, 21);
}

TEST(KvCache, CopyOnWriteCountsAgainstFreeBlocks) {
  KvCache c = make(2, 4);
  ASSERT_TRUE(c.reserve(0, 6).is_ok());  // both blocks
  write_rows(c, 0, 0, 6);
  c.set_length(0, 6);
  const std::vector<std::int32_t> shared(c.block_table(0).begin(), c.block_table(0).end());
  for (std::int32_t b : shared) c.pool().ref(b);
  c.attach_prefix(1, shared, 6);
  const Status st = c.reserve(1, 7);  // needs a copy of the second block, none free
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(c.block_table(1)[1], shared[1]);
  EXPECT_EQ(c.pool().ref_count(shared[1]), 2);
}

TEST(KvCache, TruncateAndFreeReturnBlocks) {
  KvCache c = make(8, 16);
  ASSERT_TRUE(c.reserve(3, 40).is_ok());
  write_rows(c, 3, 0, 40);
  c.set_length(3, 40);
  EXPECT_EQ(c.pool().n_free(), 5);
  c.truncate(3, 17);  // keeps blocks 0 and 1
  EXPECT_EQ(c.length(3), 17);
  EXPECT_EQ(c.block_table(3).size(), 2u);
  EXPECT_EQ(c.pool().n_free(), 6);
  expect_rows(c, 3, 3, 0, 17);
  c.truncate(3, 16);
  EXPECT_EQ(c.block_table(3).size(), 1u);
  EXPECT_EQ(c.pool().n_free(), 7);
  c.truncate(3, 0);
  EXPECT_TRUE(c.has_sequence(3));
  EXPECT_EQ(c.pool().n_free(), 8);

  ASSERT_TRUE(c.reserve(3, 20).is_ok());
  ASSERT_TRUE(c.reserve(4, 20).is_ok());
  c.free_sequence(3);
  EXPECT_FALSE(c.has_sequence(3));
  EXPECT_EQ(c.pool().n_free(), 6);
  c.free_sequence(3);  // unknown: no-op
  c.free_sequence(99);
  EXPECT_EQ(c.pool().n_free(), 6);

  // A shared block survives the free of one of its holders.
  const std::vector<std::int32_t> shared(c.block_table(4).begin(), c.block_table(4).end());
  for (std::int32_t b : shared) c.pool().ref(b);
  c.attach_prefix(5, shared, 20);
  c.free_sequence(4);
  EXPECT_EQ(c.pool().n_free(), 6);
  EXPECT_EQ(c.pool().ref_count(shared[0]), 1);
  c.free_sequence(5);
  EXPECT_EQ(c.pool().n_free(), 8);
}

TEST(KvCache, ForkSharesEveryBlockAndCopiesOnWrite) {
  KvCache c = make(6, 4);
  ASSERT_TRUE(c.reserve(0, 6).is_ok());
  write_rows(c, 0, 0, 6);
  c.set_length(0, 6);
  c.fork(0, 1);
  EXPECT_EQ(c.length(1), 6);
  EXPECT_EQ(c.pool().n_free(), 4);
  for (std::int32_t b : c.block_table(0)) EXPECT_EQ(c.pool().ref_count(b), 2);
  expect_rows(c, 1, 0, 0, 6);
  ASSERT_TRUE(c.reserve(1, 7).is_ok());  // position 6 is in the shared second block: copied
  EXPECT_EQ(c.pool().n_free(), 3);
  write_rows(c, 1, 6, 7);
  c.set_length(1, 7);
  expect_rows(c, 1, 0, 0, 6);
  expect_rows(c, 1, 1, 6, 7);
  expect_rows(c, 0, 0, 0, 6);
  c.free_sequence(0);
  c.free_sequence(1);
  EXPECT_EQ(c.pool().n_free(), 6);
}

TEST(KvCache, CompactMovesAcceptedRowsAndReleasesTheRest) {
  for (DType dtype : {DType::kF32, DType::kQ8_0, DType::kI8}) {
    KvCache c = make(6, 4, dtype);
    ASSERT_TRUE(c.reserve(2, 13).is_ok());  // 4 blocks
    write_rows(c, 2, 0, 13);
    c.set_length(2, 13);
    std::vector<std::vector<float>> want;  // rows at 5, 7, 10 as stored
    const std::vector<std::int64_t> from = {5, 7, 10};
    for (std::int64_t p : from) want.push_back(read_row(c.k_view(2, 1), p));
    c.compact(2, 5, from);
    EXPECT_EQ(c.length(2), 8);
    EXPECT_EQ(c.block_table(2).size(), 2u);
    EXPECT_EQ(c.pool().n_free(), 4);
    for (std::size_t j = 0; j < from.size(); ++j) {
      EXPECT_EQ(read_row(c.k_view(2, 1), 5 + static_cast<std::int64_t>(j)), want[j]) << dtype_name(dtype);
    }
    if (dtype == DType::kF32) expect_rows(c, 2, 2, 0, 5);
  }
}

}  // namespace
}  // namespace peregrine

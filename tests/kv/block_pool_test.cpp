// BlockPool: allocation, reference counting and the free list.
#include "peregrine/kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace peregrine {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(5);
  EXPECT_EQ(pool.n_blocks(), 5);
  EXPECT_EQ(pool.n_free(), 5);
  std::set<std::int32_t> ids;
  for (int i = 0; i < 5; ++i) {
    const auto id = pool.allocate();
    ASSERT_TRUE(id.has_value());
    EXPECT_GE(*id, 0);
    EXPECT_LT(*id, 5);
    EXPECT_EQ(pool.ref_count(*id), 1);
    ids.insert(*id);
  }
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(pool.allocate().has_value());
}

TEST(BlockPool, BlockReturnsToTheFreeListWithItsLastReference) {
  BlockPool pool(2);
  const std::int32_t a = *pool.allocate();
  pool.ref(a);
  pool.ref(a);
  EXPECT_EQ(pool.ref_count(a), 3);
  pool.unref(a);
  pool.unref(a);
  EXPECT_EQ(pool.ref_count(a), 1);
  EXPECT_EQ(pool.n_free(), 1);
  pool.unref(a);
  EXPECT_EQ(pool.ref_count(a), 0);
  EXPECT_EQ(pool.n_free(), 2);
  // Both blocks can be taken again, the released one included.
  const std::int32_t b = *pool.allocate(), c = *pool.allocate();
  EXPECT_TRUE(b == a || c == a);
  EXPECT_EQ(pool.n_free(), 0);
}

TEST(BlockPool, EmptyPool) {
  BlockPool pool(0);
  EXPECT_EQ(pool.n_blocks(), 0);
  EXPECT_FALSE(pool.allocate().has_value());
}

}  // namespace
}  // namespace peregrine

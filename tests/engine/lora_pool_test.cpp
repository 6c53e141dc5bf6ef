// LoraPool (engine/lora_pool.h): adapters load on first acquire, stay while pinned, and the
// least recently used unpinned one makes room; with every slot pinned acquire answers "none"
// without loading; a loader's error evicts nothing. Real stories260K-shaped random adapters.
#include <gtest/gtest.h>

#include "peregrine/engine/lora_pool.h"
#include "test_models.h"

namespace peregrine {
namespace {

struct Pool {
  std::unique_ptr<LlamaModel> model = test::load_stories260k();
  std::vector<int> loads = std::vector<int>(4, 0);
  bool fail = false;  // the loaders' next calls fail
  std::unique_ptr<LoraPool> pool;

  explicit Pool(std::int32_t max_resident) {
    std::vector<LoraLoader> loaders;
    for (std::int32_t k = 0; k < 4; ++k) {
      loaders.push_back([this, k]() -> Expected<std::vector<LoraSlotEntry>> {
        if (fail) return io_error("adapter " + std::to_string(k) + " cannot be read");
        ++loads[static_cast<std::size_t>(k)];
        const auto seed = static_cast<std::uint32_t>(k + 1);
        return std::vector<LoraSlotEntry>{
            {std::make_shared<LoraAdapter>(test::random_lora_adapter(model->file(), 2, 4.0f, seed, {"attn_q"})), 1.0f}};
      });
    }
    pool = std::make_unique<LoraPool>(std::move(loaders), max_resident);
  }

  std::int32_t acquire(std::int32_t adapter) {
    auto slot = pool->acquire(adapter);
    EXPECT_TRUE(slot) << slot.status().message();
    return slot && *slot ? **slot : -1;
  }
};

TEST(LoraPool, LoadsOnDemandAndEvictsTheLeastRecentlyUsedUnpinned) {
  Pool p(2);
  ASSERT_TRUE(p.model);
  const std::int32_t s0 = p.acquire(0), s1 = p.acquire(1);
  EXPECT_EQ(s0, 0);
  EXPECT_EQ(s1, 1);
  EXPECT_EQ(p.acquire(0), s0);  // resident: no load
  EXPECT_EQ(p.loads, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(p.acquire(2), -1);  // both slots pinned: none, nothing loaded
  EXPECT_EQ(p.loads[2], 0);
  p.pool->release(s1);
  EXPECT_EQ(p.acquire(2), s1);  // adapter 1's slot was the only unpinned one
  EXPECT_EQ(p.pool->adapter_in(s1), 2);
  p.pool->release(s0);
  p.pool->release(s0);
  p.pool->release(s1);
  EXPECT_EQ(p.acquire(3), s0);  // adapter 0 was used before adapter 2
  EXPECT_EQ(p.pool->loads(), 4);
  EXPECT_EQ(p.pool->evictions(), 2);
  EXPECT_EQ(p.pool->set().n_slots(), 2);
}

TEST(LoraPool, ErrorsLeaveTheResidentAdaptersInPlace) {
  Pool p(1);
  ASSERT_TRUE(p.model);
  EXPECT_EQ(p.pool->acquire(4).status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(p.pool->acquire(-1).status().code(), ErrorCode::kOutOfRange);
  const std::int32_t s0 = p.acquire(0);
  p.pool->release(s0);
  p.fail = true;
  const auto failed = p.pool->acquire(1);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.status().code(), ErrorCode::kIoError);
  EXPECT_EQ(p.pool->adapter_in(s0), 0);  // still resident
  EXPECT_EQ(p.pool->evictions(), 0);
  EXPECT_EQ(p.acquire(0), s0);  // served without a load
}

}  // namespace
}  // namespace peregrine

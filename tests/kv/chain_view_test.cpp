// chain_view (kv/kv_layer_view.h): a token-tree row's view reads the cached positions in place
// and its path's run slots as consecutive positions, from a copy starting at p0's block.
#include <gtest/gtest.h>

#include <cstring>

#include "peregrine/kv/kv_layer_view.h"

namespace peregrine {
namespace {

float first_value(const KvLayerView& view, std::int64_t pos) {
  float v;
  std::memcpy(&v, view.row(pos), sizeof v);
  return v;
}

TEST(ChainView, CachedPositionsInPlaceThenThePathAsAChain) {
  // 3 blocks of 4 rows of 2 f32 values, stored in the order 2, 0, 1; row value = its slot.
  const std::int32_t block_table[] = {2, 0, 1};
  std::vector<float> pool(3 * 4 * 2);
  for (std::int32_t slot = 0; slot < 12; ++slot) {
    const std::int32_t at = block_table[slot / 4] * 4 + slot % 4;
    pool[static_cast<std::size_t>(2 * at)] = static_cast<float>(slot);
    pool[static_cast<std::size_t>(2 * at + 1)] = -static_cast<float>(slot);
  }
  const KvLayerView view{reinterpret_cast<const std::uint8_t*>(pool.data()), block_table, 4, DType::kF32, 8};
  const std::vector<std::int32_t> path = {0, 2, 3};  // run rows at slots 5, 7, 8
  std::vector<std::uint8_t> buffer;
  const KvLayerView chain = chain_view(view, 5, path, buffer);
  EXPECT_EQ(chain.tail_begin, 4);
  EXPECT_EQ(buffer.size(), static_cast<std::size_t>((1 + 3) * 8));
  for (std::int64_t pos = 0; pos < 5; ++pos) EXPECT_EQ(first_value(chain, pos), static_cast<float>(pos));
  EXPECT_EQ(chain.row(3), view.row(3));  // before p0's block: read in place
  EXPECT_EQ(first_value(chain, 5), 5.0f);
  EXPECT_EQ(first_value(chain, 6), 7.0f);
  EXPECT_EQ(first_value(chain, 7), 8.0f);
  float second;
  std::memcpy(&second, chain.row(7) + 4, sizeof second);
  EXPECT_EQ(second, -8.0f);
}

}  // namespace
}  // namespace peregrine

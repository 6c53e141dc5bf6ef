#include "peregrine/core/dtype.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(DType, BlockLayoutsMatchGguf) {
  EXPECT_EQ(dtype_block_size(DType::kF32), 1u);
  EXPECT_EQ(dtype_block_size(DType::kQ8_0), 32u);
  EXPECT_EQ(dtype_block_size(DType::kQ4_0), 32u);
  EXPECT_EQ(dtype_block_bytes(DType::kF32), 4u);
  EXPECT_EQ(dtype_block_bytes(DType::kF16), 2u);
  EXPECT_EQ(dtype_block_bytes(DType::kBF16), 2u);
  EXPECT_EQ(dtype_block_bytes(DType::kQ8_0), 34u);  // f16 d + 32 x int8
  EXPECT_EQ(dtype_block_bytes(DType::kQ4_0), 18u);  // f16 d + 16 bytes of nibbles
}

TEST(DType, RowBytesRequiresWholeBlocks) {
  EXPECT_EQ(dtype_row_bytes(DType::kF32, 7), 28u);
  EXPECT_EQ(dtype_row_bytes(DType::kBF16, 33), 66u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0, 96), 3u * 34u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 64), 2u * 18u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 0), 0u);
  EXPECT_FALSE(dtype_row_bytes(DType::kQ8_0, 33).has_value());
  EXPECT_FALSE(dtype_row_bytes(DType::kQ4_0, 172).has_value());
}

TEST(DType, NamesRoundTripCaseInsensitively) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_from_name("Q4_0"), DType::kQ4_0);
  EXPECT_EQ(dtype_from_name("BF16"), DType::kBF16);
  EXPECT_FALSE(dtype_from_name("q4_1").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
}

}  // namespace
}  // namespace peregrine

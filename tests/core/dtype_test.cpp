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
  // ggml-common.h's block sizes: 32-value blocks and 256-value super-blocks.
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_1, 64), 2u * 20u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ5_0, 32), 22u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ5_1, 32), 24u);
  EXPECT_EQ(dtype_row_bytes(DType::kIQ4_NL, 32), 18u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ2_K, 512), 2u * 84u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ3_K, 256), 110u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_K, 256), 144u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ5_K, 256), 176u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ6_K, 256), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::kIQ4_XS, 256), 136u);
  EXPECT_FALSE(dtype_row_bytes(DType::kQ4_K, 64).has_value());
  EXPECT_FALSE(dtype_row_bytes(DType::kIQ4_XS, 288).has_value());
}

TEST(DType, NamesRoundTripCaseInsensitively) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                  DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                  DType::kIQ4_XS}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_from_name("Q4_0"), DType::kQ4_0);
  EXPECT_EQ(dtype_from_name("BF16"), DType::kBF16);
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::kQ4_K);
  EXPECT_EQ(dtype_from_name("IQ4_XS"), DType::kIQ4_XS);
  EXPECT_FALSE(dtype_from_name("q4_k_m").has_value());  // a file mix, not a tensor type
  EXPECT_FALSE(dtype_from_name("iq2_xxs").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
}

}  // namespace
}  // namespace peregrine

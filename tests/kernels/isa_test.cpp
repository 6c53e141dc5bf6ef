#include "peregrine/kernels/cpu/isa.h"

#include <gtest/gtest.h>

#include <string>

#include "peregrine/kernels/cpu/quant_packed.h"

namespace peregrine {
namespace {

constexpr IsaLevel kLevels[] = {IsaLevel::kScalar, IsaLevel::kSse4, IsaLevel::kAvx2, IsaLevel::kAvx512,
                                IsaLevel::kAvx512Vnni};

// Restores the uncapped level when a test ends, whatever it capped.
class IsaTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(limit_isa(*parse_isa_level("native"))); }
};

TEST_F(IsaTest, NamesRoundTrip) {
  for (IsaLevel level : kLevels) {
    auto parsed = parse_isa_level(isa_level_name(level));
    ASSERT_TRUE(parsed) << isa_level_name(level);
    EXPECT_EQ(*parsed, level);
  }
}

TEST_F(IsaTest, UnknownNameIsAClearError) {
  auto parsed = parse_isa_level("avx3");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("avx2"), std::string::npos) << parsed.status().message();
}

// Every level at or below the machine's either runs (this build carries it: the dispatch and
// every feature check then report exactly that level) or is refused with a reason; a level
// above the machine's is refused.
TEST_F(IsaTest, CappingSetsTheLevelTheKernelsRunAt) {
  const IsaLevel native = isa_level();
  EXPECT_EQ(*parse_isa_level("native"), native);
  int ran = 0;
  for (IsaLevel level : kLevels) {
    const Status s = limit_isa(level);
    if (level > native) {
      EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << isa_level_name(level);
      continue;
    }
    if (!s) {  // a native build carries only its baseline and above
      EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
      EXPECT_NE(s.message().find("PEREGRINE_NATIVE=OFF"), std::string::npos) << s.message();
      continue;
    }
    ++ran;
    EXPECT_EQ(isa_level(), level) << isa_level_name(level);
    EXPECT_EQ(quant_packed_gemv_available(), level >= IsaLevel::kAvx2) << isa_level_name(level);
  }
  EXPECT_GE(ran, 1);
  ASSERT_TRUE(limit_isa(native));
  EXPECT_EQ(isa_level(), native);
}

}  // namespace
}  // namespace peregrine

#include "peregrine/kernels/cpu/isa.h"

#include <gtest/gtest.h>

#include <string>

#include "peregrine/kernels/cpu/matmul/quant_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_packed.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_q8_packed.h"

namespace peregrine {
namespace {

#if defined(__x86_64__)
constexpr IsaLevel kLevels[] = {IsaLevel::kScalar, IsaLevel::kSse4, IsaLevel::kAvx2, IsaLevel::kAvx2Vnni,
                                IsaLevel::kAvx512, IsaLevel::kAvx512Vnni};
// AVX-512 VNNI does not imply AVX-VNNI (Zen 4, Ice Lake): capping there names the missing extension.
bool may_lack_extension(IsaLevel level) { return level == IsaLevel::kAvx2Vnni; }
// The packed Q4_0 / Q8_0 GEMVs, dense and 2:4 sparse, and the packed 2:4 F16 / BF16 one have
// SIMD kernels from AVX2 on.
bool packs_quant(IsaLevel level) { return level >= IsaLevel::kAvx2; }
#else
constexpr IsaLevel kLevels[] = {IsaLevel::kScalar, IsaLevel::kNeon};
bool packs_quant(IsaLevel) { return false; }
bool may_lack_extension(IsaLevel) { return false; }
#endif

// Restores the level the process started with (uncapped, or PEREGRINE_ISA's) when a test ends.
class IsaTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ASSERT_TRUE(limit_isa(*parse_isa_level("native")));
    ASSERT_TRUE(isa_from_environment());
  }
};

TEST_F(IsaTest, NamesRoundTrip) {
  for (IsaLevel level : kLevels) {
    auto parsed = parse_isa_level(isa_level_name(level));
    ASSERT_TRUE(parsed) << isa_level_name(level);
    EXPECT_EQ(*parsed, level);
  }
}

TEST_F(IsaTest, UnknownNameIsAClearError) {
  auto parsed = parse_isa_level("avx3");  // Highway's name, not a level's
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(isa_level_name(kLevels[1])), std::string::npos) << parsed.status().message();
}

// Every level at or below the machine's either runs (this build carries it: the dispatch and
// every feature check then report exactly that level) or is refused with a reason; a level
// above the machine's is refused.
TEST_F(IsaTest, CappingSetsTheLevelTheKernelsRunAt) {
  const IsaLevel native = *parse_isa_level("native");  // the CPU's best, whatever the cap now
  EXPECT_GE(native, isa_level());
  int ran = 0;
  for (IsaLevel level : kLevels) {
    const Status s = limit_isa(level);
    if (level > native) {
      EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << isa_level_name(level);
      continue;
    }
    if (!s) {  // a build carries only its baseline and above (x86-64: -march=native)
      EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
      const bool lacks = may_lack_extension(level) && s.message().find("no AVX-VNNI") != std::string::npos;
      EXPECT_TRUE(lacks || s.message().find("baseline") != std::string::npos) << s.message();
      continue;
    }
    ++ran;
    EXPECT_EQ(isa_level(), level) << isa_level_name(level);
    EXPECT_EQ(quant_packed_gemv_available(), packs_quant(level)) << isa_level_name(level);
    EXPECT_EQ(sparse_q8_packed_gemv_available(), packs_quant(level)) << isa_level_name(level);
    EXPECT_EQ(sparse_packed_gemv_available(), packs_quant(level)) << isa_level_name(level);
  }
  EXPECT_GE(ran, 1);
  ASSERT_TRUE(limit_isa(native));
  EXPECT_EQ(isa_level(), native);
}

}  // namespace
}  // namespace peregrine

// The run-time count → template argument helper (kernels/cpu/count_dispatch.h) and the decode
// read streams built on it (kernels/cpu/matmul/decode_prefetch.h): exactly one call, with the count as
// its argument, inside the range, none outside; every row group read exactly once by
// for_decode_streams, the leftovers as one-group streams.
#include "kernels/cpu/count_dispatch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul/decode_prefetch.h"

namespace peregrine {
namespace {

TEST(CountDispatch, CallsOnceWithTheCountInsideTheRange) {
  for (std::size_t n = 0; n <= 14; ++n) {
    std::vector<std::size_t> got;
    const bool called = dispatch_count<std::size_t{2}, std::size_t{12}>(n, [&]<std::size_t k>() { got.push_back(k); });
    const bool inside = n >= 2 && n <= 12;
    EXPECT_EQ(called, inside) << n;
    ASSERT_EQ(got.size(), inside ? 1u : 0u) << n;
    if (inside) {
      EXPECT_EQ(got[0], n);
    }
  }
}

TEST(CountDispatch, SignedBoundsWithUnsignedAndSignedCounts) {
  int seen = 0;
  const auto record = [&]<int k>() { seen = k; };
  EXPECT_TRUE((dispatch_count<1, 3>(std::size_t{3}, record)));
  EXPECT_EQ(seen, 3);
  EXPECT_FALSE((dispatch_count<1, 3>(std::int64_t{-1}, record)));
  EXPECT_EQ(seen, 3);
}

template <int kStreams>
void expect_every_group_once(std::int64_t g0, std::int64_t g1) {
  std::vector<int> reads(static_cast<std::size_t>(g1), 0);
  for_decode_streams<kStreams>(g0, g1, [&]<int S>(std::int64_t g, std::int64_t stride) {
    static_assert(S >= 1 && S <= kStreams);
    if (S < kStreams) {
      EXPECT_EQ(stride, 1) << "leftover groups are one-group streams";
    }
    for (int s = 0; s < S; ++s) ++reads.at(static_cast<std::size_t>(g + s * stride));
  });
  for (std::int64_t g = 0; g < g1; ++g) EXPECT_EQ(reads[static_cast<std::size_t>(g)], g >= g0 ? 1 : 0) << g;
}

TEST(DecodeStreams, EveryGroupOnce) {
  for (std::int64_t n = 0; n <= 19; ++n) {
    expect_every_group_once<kDecodeStreams>(5, 5 + n);
    expect_every_group_once<2>(5, 5 + n);
  }
}

}  // namespace
}  // namespace peregrine

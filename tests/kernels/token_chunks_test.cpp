// The token loop of the packed GEMVs (kernels/cpu/token_chunks.h): every token lands in exactly
// one chunk, chunks are at most kMax tokens and differ by at most one, and over a group's chunks
// NextGroupHints hints every step of the next group exactly once, in order, each chunk its own
// contiguous range at every C-th step of its walk.
#include "kernels/cpu/token_chunks.h"

#include <gtest/gtest.h>

#include <vector>

namespace peregrine {
namespace {

struct Call {
  std::size_t g, size;
  TokenChunk chunk;
};

template <std::size_t kMax>
std::vector<Call> calls(std::size_t g0, std::size_t g1, std::size_t n_tokens) {
  std::vector<Call> out;
  for_groups_in_token_chunks<kMax>(g0, g1, n_tokens, [&]<std::size_t T>(std::size_t g, TokenChunk chunk) {
    out.push_back({g, T, chunk});
  });
  return out;
}

TEST(TokenChunks, EveryTokenOnceInBalancedChunks) {
  for (std::size_t n = 1; n <= 40; ++n) {
    const auto got = calls<6>(3, 5, n);
    const std::size_t chunks = (n + 5) / 6;
    ASSERT_EQ(got.size(), 2 * chunks) << n;
    for (std::size_t k = 0; k < got.size(); ++k) {
      const Call& c = got[k];
      EXPECT_EQ(c.g, 3 + k / chunks);
      EXPECT_EQ(c.chunk.index, k % chunks);
      EXPECT_EQ(c.chunk.count, chunks);
      EXPECT_LE(c.size, 6u);
      EXPECT_GE(c.size + 1, (n + chunks - 1) / chunks) << "sizes differ by at most one, n=" << n;
      EXPECT_LE(c.size, (n + chunks - 1) / chunks);
      const std::size_t next_first = k % chunks + 1 < chunks ? got[k + 1].chunk.first : n;
      EXPECT_EQ(c.chunk.first + c.size, next_first) << "contiguous and complete, n=" << n;
    }
    EXPECT_EQ(got.front().chunk.first, 0u);
  }
}

TEST(TokenChunks, NoTokensNoCalls) { EXPECT_TRUE(calls<4>(0, 8, 0).empty()); }

TEST(TokenChunks, HintsCoverTheNextGroupOnceInContiguousRanges) {
  for (std::size_t count = 1; count <= 6; ++count) {
    for (std::size_t steps : {1u, 5u, 12u, 13u, 512u}) {
      std::vector<int> hinted(steps, 0);
      std::size_t expected_next = 0;
      for (std::size_t index = 0; index < count; ++index) {
        NextGroupHints hints(TokenChunk{0, index, count}, steps);
        for (std::size_t s = 0; s < steps; ++s) {
          std::size_t step = steps;
          if (!hints.due(step)) continue;
          EXPECT_EQ(s % count, 0u) << "every " << count << "-th step of the walk";
          ASSERT_LT(step, steps);
          EXPECT_EQ(step, expected_next) << "in order, chunk after chunk";
          expected_next = step + 1;
          ++hinted[step];
        }
      }
      for (std::size_t s = 0; s < steps; ++s) {
        EXPECT_EQ(hinted[s], 1) << "step " << s << " of " << steps << ", " << count << " chunks";
      }
    }
  }
}

}  // namespace
}  // namespace peregrine

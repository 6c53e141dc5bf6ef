// Sliding evaluation windows: which tokens each window feeds and scores, and bad options.
#include "peregrine/eval/eval_windows.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peregrine {
namespace {

std::vector<EvalWindow> plan(std::int64_t n, std::int64_t ctx, std::int64_t stride) {
  auto w = plan_windows(n, ctx, stride);
  EXPECT_TRUE(w) << w.status().message();
  return w ? *w : std::vector<EvalWindow>{};
}

// How many windows score each token [0, n).
std::vector<int> times_scored(const std::vector<EvalWindow>& windows, std::int64_t n) {
  std::vector<int> count(static_cast<std::size_t>(n), 0);
  for (const EvalWindow& w : windows) {
    for (std::int64_t t = w.first_target; t < w.end; ++t) ++count[static_cast<std::size_t>(t)];
  }
  return count;
}

TEST(PlanWindows, HuggingFaceStridedWindows) {
  // n = 10, ctx 4, stride 2: [0,4) scores 1..3, [2,6) 4..5, [4,8) 6..7, [6,10) 8..9.
  const auto w = plan(10, 4, 2);
  ASSERT_EQ(w.size(), 4u);
  const std::int64_t want[][3] = {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}};
  for (std::size_t k = 0; k < w.size(); ++k) {
    EXPECT_EQ(w[k].begin, want[k][0]) << k;
    EXPECT_EQ(w[k].end, want[k][1]) << k;
    EXPECT_EQ(w[k].first_target, want[k][2]) << k;
  }
}

TEST(PlanWindows, EveryTokenAfterTheFirstIsScoredOnceWithEnoughContext) {
  for (std::int64_t n : {2, 3, 17, 100, 513}) {
    for (std::int64_t ctx : {2, 5, 64, 512}) {
      for (std::int64_t stride : {std::int64_t{1}, ctx / 2, ctx - 1}) {
        if (stride < 1) continue;
        const std::string what = "n=" + std::to_string(n) + " ctx=" + std::to_string(ctx) + " stride=" + std::to_string(stride);
        const auto w = plan(n, ctx, stride);
        const auto count = times_scored(w, n);
        EXPECT_EQ(count[0], 0) << what;
        for (std::int64_t t = 1; t < n; ++t) ASSERT_EQ(count[static_cast<std::size_t>(t)], 1) << what << " t=" << t;
        for (std::size_t k = 0; k < w.size(); ++k) {
          EXPECT_LE(w[k].end - w[k].begin, ctx) << what;
          EXPECT_GT(w[k].first_target, w[k].begin) << what;  // the target's predecessor is in the window
          // Later windows: every scored token sees at least ctx - stride tokens before it.
          if (k > 0) {
            EXPECT_GE(w[k].first_target - w[k].begin, ctx - stride) << what;
          }
        }
        EXPECT_EQ(w.back().end, n) << what;
      }
    }
  }
}

TEST(PlanWindows, ShortTextIsOneWindow) {
  const auto w = plan(100, 512, 256);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 100);
  EXPECT_EQ(w[0].first_target, 1);
  EXPECT_EQ(w[0].n_targets(), 99);
}

TEST(PlanWindows, DisjointWindowsSkipEachWindowsFirstToken) {
  // stride == ctx: [0,4) [4,8) [8,10); tokens 4 and 8 have no predecessor in their window.
  const auto w = plan(10, 4, 4);
  ASSERT_EQ(w.size(), 3u);
  const auto count = times_scored(w, 10);
  EXPECT_EQ(count, (std::vector<int>{0, 1, 1, 1, 0, 1, 1, 1, 0, 1}));
  // [0,4) [4,8) [8,9): the last window would score nothing and is dropped.
  EXPECT_EQ(plan(9, 4, 4).size(), 2u);
}

TEST(PlanWindows, RejectsBadOptions) {
  auto message = [](std::int64_t n, std::int64_t ctx, std::int64_t stride) {
    auto w = plan_windows(n, ctx, stride);
    EXPECT_FALSE(w);
    if (w) return std::string();
    EXPECT_EQ(w.status().code(), ErrorCode::kInvalidArgument);
    return w.status().message();
  };
  EXPECT_NE(message(1, 8, 4).find("at least 2 tokens"), std::string::npos);
  EXPECT_NE(message(0, 8, 4).find("at least 2 tokens"), std::string::npos);
  EXPECT_NE(message(100, 1, 1).find("--ctx must be >= 2"), std::string::npos);
  EXPECT_NE(message(100, -5, 1).find("--ctx must be >= 2"), std::string::npos);
  EXPECT_NE(message(100, 8, 0).find("--stride must be in [1, ctx = 8]"), std::string::npos);
  EXPECT_NE(message(100, 8, 9).find("--stride must be in [1, ctx = 8] (got 9)"), std::string::npos);
}

}  // namespace
}  // namespace peregrine

// Masks of unstructured and N:M targets: how many weights each scope keeps, N:M groups and
// their tail, determinism on ties, and the targets' validation.
#include "peregrine/prune/sparsity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace peregrine {
namespace {

std::vector<float> random_scores(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> s(static_cast<std::size_t>(n));
  for (float& v : s) v = u(rng);
  return s;
}

std::int64_t kept_in(const std::vector<std::uint8_t>& keep, std::int64_t first, std::int64_t len) {
  return std::count(keep.begin() + first, keep.begin() + first + len, std::uint8_t{1});
}

TEST(SelectMask, PerRowPrunesTheLowestScoresOfEachRow) {
  const std::int64_t rows = 7, cols = 45;
  const auto scores = random_scores(rows * cols, 1);
  const auto keep = select_mask(scores, rows, cols, {0.5}, MaskScope::kPerRow);
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(kept_in(keep, r * cols, cols), cols - 23) << r;  // llround(22.5) = 23 pruned
    float max_pruned = -1, min_kept = 2;
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      if (keep[i] != 0) {
        min_kept = std::min(min_kept, scores[i]);
      } else {
        max_pruned = std::max(max_pruned, scores[i]);
      }
    }
    EXPECT_LT(max_pruned, min_kept);
  }
}

TEST(SelectMask, PerTensorComparesTheWholeMatrix) {
  const std::int64_t rows = 6, cols = 10;
  std::vector<float> scores(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i);  // row 0 lowest
  const auto keep = select_mask(scores, rows, cols, {0.25}, MaskScope::kPerTensor);
  EXPECT_EQ(kept_in(keep, 0, rows * cols), 45);
  EXPECT_EQ(kept_in(keep, 0, cols), 0);   // rows 0 and half of 1 go
  EXPECT_EQ(kept_in(keep, cols, cols), 5);
  EXPECT_EQ(kept_in(keep, 2 * cols, 4 * cols), 4 * cols);
}

TEST(SelectMask, NmKeepsTheHighestNOfEveryGroupAndLeavesTheTail) {
  const std::int64_t rows = 5, cols = 4 * 9 + 3;
  const auto scores = random_scores(rows * cols, 2);
  const auto keep = select_mask(scores, rows, cols, {0.0, 2, 4}, MaskScope::kPerTensor);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t g = 0; g + 4 <= cols; g += 4) {
      const std::int64_t at = r * cols + g;
      ASSERT_EQ(kept_in(keep, at, 4), 2);
      for (std::int64_t i = 0; i < 4; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
          if (keep[static_cast<std::size_t>(at + i)] && !keep[static_cast<std::size_t>(at + j)]) {
            EXPECT_GE(scores[static_cast<std::size_t>(at + i)], scores[static_cast<std::size_t>(at + j)]);
          }
        }
      }
    }
    EXPECT_EQ(kept_in(keep, r * cols + cols - 3, 3), 3);  // 39 % 4: stays dense
  }
  std::vector<float> w(scores);
  apply_mask(w, keep);
  EXPECT_TRUE(follows_pattern(w, rows, cols, {0.0, 2, 4}));
  EXPECT_FALSE(follows_pattern(scores, rows, cols, {0.0, 2, 4}));
}

TEST(SelectMask, TiesGoByIndex) {
  const std::vector<float> scores(8, 1.0f);
  const auto keep = select_mask(scores, 1, 8, {0.0, 4, 8}, MaskScope::kPerRow);
  EXPECT_EQ(keep, (std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(SparsityTarget, ValidatesAndParses) {
  for (double s : {0.0, 1.0, -0.1, 1.5}) {
    const Status st = SparsityTarget{s}.validate();
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("outside (0, 1)"), std::string::npos) << st.message();
  }
  EXPECT_TRUE(SparsityTarget{0.5}.validate().is_ok());
  auto t = parse_nm_pattern("2:4");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->n, 2);
  EXPECT_EQ(t->m, 4);
  EXPECT_DOUBLE_EQ(t->removed_fraction(), 0.5);
  EXPECT_EQ(t->describe(), "2:4");
  for (const char* bad : {"4:4", "5:4"}) {
    auto e = parse_nm_pattern(bad);
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_NE(e.status().message().find("N must be below M"), std::string::npos) << e.status().message();
  }
  for (const char* bad : {"2-4", "0:4", "a:4", "2:", ":4", "2:4x", "2:128"}) {
    EXPECT_FALSE(parse_nm_pattern(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace peregrine

// NgramIndex against a brute-force backward scan, on real TinyStories tokens synced one token at
// a time and across divergent rewrites of the tail (speculative rollback).
#include "peregrine/spec/ngram_index.h"

#include <gtest/gtest.h>

#include <random>

#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

/// Every e < size with tokens[e - n, e) == the last n tokens, newest first.
std::vector<std::int32_t> scan(const std::vector<std::int32_t>& tokens, std::int32_t n) {
  std::vector<std::int32_t> out;
  const auto size = static_cast<std::int32_t>(tokens.size());
  if (n >= size) return out;
  for (std::int32_t e = size - 1; e >= n; --e) {
    if (std::equal(tokens.end() - n, tokens.end(), tokens.begin() + (e - n))) out.push_back(e);
  }
  return out;
}

std::vector<std::int32_t> story_tokens() {
  auto file = load_model_file(test::stories260k_path());
  EXPECT_TRUE(file) << file.status().message();
  auto tok = load_tokenizer(*file);
  EXPECT_TRUE(tok) << tok.status().message();
  return (*tok)->encode(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt"), true);
}

void expect_matches_scan(const NgramIndex& index, const std::vector<std::int32_t>& tokens) {
  ASSERT_TRUE(std::equal(tokens.begin(), tokens.end(), index.tokens().begin(), index.tokens().end()));
  for (std::int32_t n = index.min_n(); n <= index.max_n(); ++n) {
    std::vector<std::int32_t> found;
    index.find(n, 1 << 20, found);
    ASSERT_EQ(found, scan(tokens, n)) << "n " << n << " at length " << tokens.size();
  }
}

TEST(NgramIndex, GrowingOneTokenAtATimeMatchesABackwardScan) {
  const std::vector<std::int32_t> story = story_tokens();
  ASSERT_GT(story.size(), 500u);
  auto index = NgramIndex::create(1, 4);
  ASSERT_TRUE(index);
  for (std::size_t len = 0; len <= story.size(); ++len) {
    const std::vector<std::int32_t> prefix(story.begin(), story.begin() + static_cast<std::ptrdiff_t>(len));
    index->sync(prefix);
    expect_matches_scan(*index, prefix);
  }
}

TEST(NgramIndex, RewrittenTailsMatchABackwardScan) {
  const std::vector<std::int32_t> story = story_tokens();
  auto index = NgramIndex::create(2, 3);
  ASSERT_TRUE(index);
  std::mt19937 rng(7);
  std::vector<std::int32_t> tokens(story.begin(), story.begin() + 200);
  for (int round = 0; round < 200; ++round) {
    // Roll back a few tokens (rejected drafts), then append a few from elsewhere in the story.
    tokens.resize(tokens.size() - rng() % 6);
    const std::size_t from = rng() % (story.size() - 8);
    tokens.insert(tokens.end(), story.begin() + static_cast<std::ptrdiff_t>(from),
                  story.begin() + static_cast<std::ptrdiff_t>(from + 1 + rng() % 7));
    index->sync(tokens);
    expect_matches_scan(*index, tokens);
  }
  index->sync({});
  expect_matches_scan(*index, {});
}

TEST(NgramIndex, MaxResultsKeepsTheNewest) {
  auto index = NgramIndex::create(1, 1);
  ASSERT_TRUE(index);
  index->sync(std::vector<std::int32_t>{4, 1, 4, 2, 4, 3, 4});
  std::vector<std::int32_t> found;
  index->find(1, 2, found);
  EXPECT_EQ(found, (std::vector<std::int32_t>{5, 3}));
  found.clear();
  index->find(2, 2, found);  // outside [min_n, max_n]
  EXPECT_TRUE(found.empty());
}

TEST(NgramIndex, BadLengthsAreErrors) {
  for (auto [lo, hi] : {std::pair{0, 3}, std::pair{3, 2}, std::pair{1, NgramIndex::kMaxNgram + 1}}) {
    auto index = NgramIndex::create(lo, hi);
    ASSERT_FALSE(index);
    EXPECT_EQ(index.status().code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace peregrine

// Prompt lookup decoding: a repeated TinyStories passage (stories260K tokenizer) is continued
// with its true text; the longest suffix wins, then the newest occurrence; trees from distinct
// continuations; no match → no draft; periodic continuation past the end; release; bad input.
#include "peregrine/spec/pld_drafter.h"

#include <gtest/gtest.h>

#include "peregrine/tokenizer/tokenizer.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::unique_ptr<PldDrafter> make_pld(std::int32_t min_ngram = 1, std::int32_t max_ngram = 3) {
  auto d = PldDrafter::create({min_ngram, max_ngram});
  EXPECT_TRUE(d) << d.status().message();
  return d ? std::move(*d) : nullptr;
}

DraftTree draft_one(Drafter& d, std::span<const std::int32_t> tokens, std::int32_t max_nodes,
                    std::int32_t branching = 1, std::int32_t seq = 0) {
  ThreadPool pool(1);
  std::vector<DraftTree> trees;
  const DraftRequest r{seq, tokens, max_nodes, branching, nullptr, nullptr};
  const Status st = d.draft({&r, 1}, trees, pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return trees.empty() ? DraftTree{} : trees[0];
}

std::vector<std::int32_t> tokens_of(const DraftTree& t) {
  std::vector<std::int32_t> out;
  for (const DraftNode& n : t.nodes) out.push_back(n.token);
  return out;
}

/// The first story of the TinyStories sample, stories260K's tokens (no BOS).
std::vector<std::int32_t> first_story() {
  auto file = load_model_file(test::stories260k_path());
  EXPECT_TRUE(file) << file.status().message();
  auto tok = load_tokenizer(*file);
  EXPECT_TRUE(tok) << tok.status().message();
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
  return (*tok)->encode(text.substr(0, text.find("<|endoftext|>")), false);
}

TEST(PldDrafter, ProposesTheTrueContinuationOfARepeatedPassage) {
  const std::vector<std::int32_t> story = first_story();
  const auto n = static_cast<std::int32_t>(story.size());
  ASSERT_GT(n, 100);
  auto pld = make_pld();
  std::vector<std::int32_t> tokens = story;  // the passage, then it again as it is generated
  tokens.insert(tokens.end(), story.begin(), story.begin() + 2);
  std::int32_t checked = 0;
  for (std::int32_t m = 3; m + 8 <= n; ++m) {
    tokens.push_back(story[static_cast<std::size_t>(m - 1)]);
    // Where the last three tokens occurred once before, it was in the first copy, at the same
    // place: the draft is the passage's next eight tokens.
    std::vector<std::int32_t> earlier;
    for (auto e = static_cast<std::int32_t>(tokens.size()) - 1; e >= 3; --e) {
      if (std::equal(tokens.end() - 3, tokens.end(), tokens.begin() + (e - 3))) earlier.push_back(e);
    }
    const DraftTree t = draft_one(*pld, tokens, 8);
    ASSERT_EQ(t.size(), 8);
    EXPECT_TRUE(t.is_chain());
    for (const DraftNode& node : t.nodes) {
      EXPECT_EQ(node.log_q, 0.0f);
      EXPECT_TRUE(node.q.empty());
    }
    if (earlier != std::vector<std::int32_t>{m}) continue;
    ++checked;
    EXPECT_EQ(tokens_of(t), std::vector<std::int32_t>(story.begin() + m, story.begin() + m + 8)) << "cut " << m;
  }
  EXPECT_GT(checked, n / 2);
}

TEST(PldDrafter, LongestSuffixWinsThenNewestOccurrence) {
  // "1 2 3" is followed by 10 11; the newer "2 3" by 20 21.
  const std::vector<std::int32_t> tokens{1, 2, 3, 10, 11, 9, 2, 3, 20, 21, 1, 2, 3};
  EXPECT_EQ(tokens_of(draft_one(*make_pld(1, 3), tokens, 2)), (std::vector<std::int32_t>{10, 11}));
  EXPECT_EQ(tokens_of(draft_one(*make_pld(1, 2), tokens, 2)), (std::vector<std::int32_t>{20, 21}));
  // One token: 4 is followed by 5, 7, then (newest) 9.
  const std::vector<std::int32_t> ones{4, 5, 6, 4, 7, 8, 4, 9, 4};
  EXPECT_EQ(tokens_of(draft_one(*make_pld(), ones, 1)), (std::vector<std::int32_t>{9}));
}

TEST(PldDrafter, AContinuationReachingTheEndRepeatsItsPeriod) {
  const std::vector<std::int32_t> tokens{7, 8, 7, 8};
  EXPECT_EQ(tokens_of(draft_one(*make_pld(), tokens, 5)), (std::vector<std::int32_t>{7, 8, 7, 8, 7}));
}

TEST(PldDrafter, TreeOfDistinctContinuationsFilledLevelByLevel) {
  // "4" is followed by "5 9 4 ..." (newest), "7 8 4 ..." and "5 6 4 ...".
  const std::vector<std::int32_t> tokens{4, 5, 6, 4, 7, 8, 4, 5, 9, 4};
  const DraftTree t = draft_one(*make_pld(), tokens, 6, 3);
  const std::vector<std::pair<std::int32_t, std::int32_t>> expected{{5, -1}, {7, -1}, {9, 0}, {8, 1}, {6, 0}, {4, 2}};
  ASSERT_EQ(t.size(), 6);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.nodes[i].token, expected[i].first) << i;
    EXPECT_EQ(t.nodes[i].parent, expected[i].second) << i;
  }
  // Two branches: the two newest continuations only.
  const DraftTree two = draft_one(*make_pld(), tokens, 4, 2);
  EXPECT_EQ(tokens_of(two), (std::vector<std::int32_t>{5, 7, 9, 8}));
  // The same continuation found through several suffix lengths counts once.
  const std::vector<std::int32_t> twice{1, 2, 3, 1, 2, 3};
  const DraftTree one = draft_one(*make_pld(), twice, 3, 2);
  EXPECT_EQ(tokens_of(one), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_TRUE(one.is_chain());
}

TEST(PldDrafter, NoOccurrenceGivesAnEmptyTree) {
  auto pld = make_pld();
  EXPECT_TRUE(draft_one(*pld, std::vector<std::int32_t>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(draft_one(*pld, std::vector<std::int32_t>{1}, 4, 1, 1).empty());
  EXPECT_TRUE(draft_one(*make_pld(2, 3), std::vector<std::int32_t>{5, 1, 2, 5}, 4).empty());  // only a 1-gram repeats
}

TEST(PldDrafter, SequencesAreIndependentAndReleased) {
  auto pld = make_pld();
  const std::vector<std::int32_t> a{1, 2, 3, 1, 2}, b{6, 7, 6};
  ThreadPool pool(1);
  std::vector<DraftTree> trees;
  const DraftRequest reqs[] = {{10, a, 2, 1, nullptr, nullptr}, {11, b, 2, 1, nullptr, nullptr}};
  ASSERT_TRUE(pld->draft(reqs, trees, pool).is_ok());
  ASSERT_EQ(trees.size(), 2u);
  EXPECT_EQ(tokens_of(trees[0]), (std::vector<std::int32_t>{3, 1}));
  EXPECT_EQ(tokens_of(trees[1]), (std::vector<std::int32_t>{7, 6}));
  EXPECT_EQ(pld->n_sequences(), 2u);
  pld->release(10);
  pld->release(99);  // unknown: no-op
  EXPECT_EQ(pld->n_sequences(), 1u);
  // A released sequence id starts afresh with other tokens.
  EXPECT_TRUE(draft_one(*pld, std::vector<std::int32_t>{1, 2, 3}, 2, 1, 10).empty());
  EXPECT_EQ(pld->method(), SpecMethod::kPld);
}

TEST(PldDrafter, BadOptionsAndRequestsAreErrors) {
  auto bad = PldDrafter::create({0, 3});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  auto pld = make_pld();
  ThreadPool pool(1);
  std::vector<DraftTree> trees;
  const std::vector<std::int32_t> tokens{1, 2};
  for (const DraftRequest& r : {DraftRequest{0, {}, 4, 1, nullptr, nullptr}, DraftRequest{0, tokens, 0, 1, nullptr, nullptr},
                                DraftRequest{0, tokens, kMaxDraftNodes + 1, 1, nullptr, nullptr},
                                DraftRequest{0, tokens, 4, 0, nullptr, nullptr}}) {
    EXPECT_EQ(pld->draft({&r, 1}, trees, pool).code(), ErrorCode::kInvalidArgument);
  }
  const DraftRequest twice[] = {{3, tokens, 4, 1, nullptr, nullptr}, {3, tokens, 4, 1, nullptr, nullptr}};
  EXPECT_EQ(pld->draft(twice, trees, pool).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine

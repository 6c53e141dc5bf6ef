#include "peregrine/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace peregrine {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Plain sampling from the full softmax: no top-k/top-p/min-p, no penalty.
SamplingParams plain(float temperature, std::uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

std::vector<float> random_logits(std::size_t n, std::mt19937& rng, float scale = 2.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// "top_p", "top-p" and "top p" all count as naming the parameter.
std::string normalized(std::string s) {
  for (auto& c : s) {
    if (c == '_' || c == ' ') c = '-';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

// log of probabilities that are exact powers of two: softmax gives them back.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// ------------------------------------------------------------------ validate

TEST(SamplingParams, DefaultsAndBoundaryValuesAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
  SamplingParams p = plain(0.0f);  // temperature 0, top_k 0, top_p 1, min_p 0
  EXPECT_TRUE(p.validate().is_ok());
  p.min_p = 1.0f;
  p.repeat_last_n = 0;
  p.top_p = 1e-6f;
  EXPECT_TRUE(p.validate().is_ok());
}

TEST(SamplingParams, RejectsEachBadValueNamingTheParameter) {
  struct Case {
    const char* param;
    void (*set)(SamplingParams&);
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kNaN; }},
      {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
      {"top-k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top-p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top-p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top-p", [](SamplingParams& p) { p.top_p = -0.5f; }},
      {"top-p", [](SamplingParams& p) { p.top_p = kNaN; }},
      {"min-p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min-p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"min-p", [](SamplingParams& p) { p.min_p = kNaN; }},
      {"repeat-penalty", [](SamplingParams& p) { p.repeat_penalty = 0.0f; }},
      {"repeat-penalty", [](SamplingParams& p) { p.repeat_penalty = -1.0f; }},
      {"repeat-penalty", [](SamplingParams& p) { p.repeat_penalty = kNaN; }},
      {"repeat-last-n", [](SamplingParams& p) { p.repeat_last_n = -2; }},
      {"presence-penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"presence-penalty", [](SamplingParams& p) { p.presence_penalty = kNaN; }},
      {"frequency-penalty", [](SamplingParams& p) { p.frequency_penalty = -2.01f; }},
      {"logit-bias", [](SamplingParams& p) { p.logit_bias = {{3, kNaN}}; }},
      {"logit-bias", [](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const Status st = p.validate();
    ASSERT_FALSE(st.is_ok()) << c.param;
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << c.param;
    EXPECT_NE(normalized(st.message()).find(c.param), std::string::npos)
        << "message '" << st.message() << "' does not name " << c.param;
  }
}

// ------------------------------------------------------------------ greedy / determinism

TEST(Sampler, TemperatureZeroIsArgmax) {
  std::mt19937 rng(1);
  Sampler s(plain(0.0f));
  for (std::size_t n : {1u, 7u, 33u, 172u}) {
    for (int rep = 0; rep < 20; ++rep) {
      auto logits = random_logits(n, rng);
      const auto expected = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(s.sample(logits, {}), expected);
      const auto dist = s.distribution(logits);
      ASSERT_EQ(dist.size(), 1u);
      EXPECT_EQ(dist[0].first, expected);
      EXPECT_EQ(dist[0].second, 1.0f);
    }
  }
}

TEST(Sampler, ArgmaxBreaksTiesTowardsLowestIndex) {
  const std::vector<float> logits = {0.0f, 3.0f, -1.0f, 3.0f, 3.0f};
  EXPECT_EQ(argmax(logits), 1);
  std::vector<float> copy = logits;
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(copy, {}), 1);
  EXPECT_EQ(s.distribution(logits)[0].first, 1);
}

std::vector<std::int32_t> draws(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    out.push_back(s.sample(l, {}));
  }
  return out;
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  std::mt19937 rng(2);
  const auto logits = random_logits(50, rng, 1.0f);
  const auto a = draws(plain(1.0f, 1234), logits, 200);
  const auto b = draws(plain(1.0f, 1234), logits, 200);
  const auto c = draws(plain(1.0f, 1235), logits, 200);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The draws are not degenerate: several distinct tokens appear.
  std::vector<std::int32_t> distinct = a;
  std::sort(distinct.begin(), distinct.end());
  EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 10);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  std::mt19937 rng(3);
  for (float t : {0.1f, 1.0f, 5.0f, 100.0f}) {
    SamplingParams p = plain(t, 99);
    p.top_k = 1;
    Sampler s(p);
    for (int rep = 0; rep < 50; ++rep) {
      auto logits = random_logits(33, rng);
      const auto expected = argmax(logits);
      ASSERT_EQ(s.sample(logits, {}), expected) << "temperature " << t;
    }
  }
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplingParams p = plain(1.0f);
  p.top_k = 3;
  Sampler s(p);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 1.0f, 0.0f, 3.0f};
  const auto dist = s.distribution(logits);
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[0].first, 6);
  EXPECT_EQ(dist[1].first, 1);
  EXPECT_EQ(dist[2].first, 3);
  const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.5);
  EXPECT_NEAR(dist[0].second, std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(dist[2].second, std::exp(1.5) / z, 1e-6);
}

// ------------------------------------------------------------------ distribution()

TEST(Sampler, DistributionIsSoftmaxAtTemperature) {
  std::mt19937 rng(4);
  const auto logits = random_logits(7, rng);
  for (float t : {0.5f, 1.0f, 2.0f}) {
    const auto dist = Sampler(plain(t)).distribution(logits);
    ASSERT_EQ(dist.size(), logits.size());
    double z = 0.0, total = 0.0;
    for (float l : logits) z += std::exp(l / t);
    for (std::size_t i = 0; i < dist.size(); ++i) {
      const auto id = static_cast<std::size_t>(dist[i].first);
      EXPECT_NEAR(dist[i].second, std::exp(logits[id] / t) / z, 1e-6) << "t=" << t;
      if (i > 0) {
        EXPECT_GE(dist[i - 1].second, dist[i].second);  // sorted, decreasing
      }
      total += dist[i].second;
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

TEST(Sampler, WholeVocabularyOrderIsDecreasingLogitThenIdAsStdSorts) {
  // Qwen2.5's vocabulary size; logits rounded to 1/8 so that ties are common, with -inf (masked),
  // -0 and +0 among them.
  std::mt19937 rng(11);
  std::vector<float> logits = random_logits(151936, rng, 6.0f);
  for (float& l : logits) l = std::round(l * 8.0f) / 8.0f;
  logits[5] = -INFINITY;
  logits[6] = -0.0f;
  logits[7] = 0.0f;
  auto start = std::chrono::steady_clock::now();
  const auto dist = Sampler(plain(1.0f)).distribution(logits);
  const double radix_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<std::int32_t> want(logits.size());
  std::iota(want.begin(), want.end(), 0);
  start = std::chrono::steady_clock::now();
  std::sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  const double sort_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // top-p 1 ends the list where the cumulative probability reaches 1 in double precision.
  ASSERT_GT(dist.size(), want.size() / 2);
  ASSERT_LE(dist.size(), want.size());
  std::size_t misplaced = 0;
  for (std::size_t i = 0; i < dist.size(); ++i) misplaced += dist[i].first != want[i];
  EXPECT_EQ(misplaced, 0u);
  const auto at = [&](std::int32_t id) {
    return std::find_if(dist.begin(), dist.end(), [&](const auto& c) { return c.first == id; }) - dist.begin();
  };
  EXPECT_EQ(at(7), at(6) + 1);  // -0 (id 6) ties +0 (id 7): by id, next to each other
  std::cout << "  distribution() over 151936 tokens: " << radix_ms << " ms (std::sort of the ids alone: " << sort_ms << " ms)\n";
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 1/2, 1/4, 1/8, 1/16, 1/16 scattered over ids; cumulative .5 .75 .875 .9375 1.
  const std::vector<double> probs = {0.0625, 0.25, 0.0625, 0.5, 0.125};
  const auto logits = logits_of(probs);
  const std::vector<std::int32_t> order = {3, 1, 4};
  struct Case {
    float top_p;
    std::size_t keep;
  };
  for (Case c : {Case{0.3f, 1}, Case{0.6f, 2}, Case{0.8f, 3}, Case{0.9f, 4}, Case{0.95f, 5}, Case{1.0f, 5}}) {
    SamplingParams p = plain(1.0f);
    p.top_p = c.top_p;
    const auto dist = Sampler(p).distribution(logits);
    ASSERT_EQ(dist.size(), c.keep) << "top_p " << c.top_p;
    double kept_mass = 0.0;
    for (std::size_t i = 0; i < c.keep; ++i) kept_mass += probs[static_cast<std::size_t>(dist[i].first)];
    for (std::size_t i = 0; i < c.keep; ++i) {
      if (i < order.size()) {
        EXPECT_EQ(dist[i].first, order[i]);
      }
      // Renormalized over the kept set.
      EXPECT_NEAR(dist[i].second, probs[static_cast<std::size_t>(dist[i].first)] / kept_mass, 1e-6);
    }
  }
}

TEST(Sampler, TopPStopsAtExactlyReachingP) {
  // Four equal logits: cumulative probabilities are exactly .25 .5 .75 1; "reaches" means >=,
  // so top_p = 0.5 keeps two tokens (ties ordered by id), not three.
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  SamplingParams p = plain(1.0f);
  p.top_p = 0.5f;
  const auto dist = Sampler(p).distribution(logits);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].first, 0);
  EXPECT_EQ(dist[1].first, 1);
  EXPECT_EQ(dist[0].second, 0.5f);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfMax) {
  const std::vector<double> probs = {0.0625, 0.25, 0.0625, 0.5, 0.125};
  const auto logits = logits_of(probs);
  struct Case {
    float min_p;
    std::size_t keep;  // floor = min_p * 0.5
  };
  for (Case c : {Case{0.0f, 5}, Case{0.1f, 5}, Case{0.2f, 3}, Case{0.3f, 2}, Case{0.6f, 1}, Case{1.0f, 1}}) {
    SamplingParams p = plain(1.0f);
    p.min_p = c.min_p;
    const auto dist = Sampler(p).distribution(logits);
    ASSERT_EQ(dist.size(), c.keep) << "min_p " << c.min_p;
    double kept_mass = 0.0;
    for (const auto& [id, prob] : dist) {
      EXPECT_GE(probs[static_cast<std::size_t>(id)], c.min_p * 0.5 - 1e-9);
      kept_mass += probs[static_cast<std::size_t>(id)];
    }
    for (const auto& [id, prob] : dist) {
      EXPECT_NEAR(prob, probs[static_cast<std::size_t>(id)] / kept_mass, 1e-6);
    }
  }
  // min-p is relative to the tempered distribution: at T = 2 the probabilities are ∝ √p,
  // i.e. relative to the max: 1, .707, .5, .354, .354; floor 0.4 keeps three.
  SamplingParams p = plain(2.0f);
  p.min_p = 0.4f;
  EXPECT_EQ(Sampler(p).distribution(logits).size(), 3u);
}

TEST(Sampler, DrawsOnlyFromTheKeptSet) {
  const std::vector<double> probs = {0.0625, 0.25, 0.0625, 0.5, 0.125};
  SamplingParams p = plain(1.0f, 5);
  p.top_p = 0.6f;  // keeps ids 3 and 1
  Sampler s(p);
  int count3 = 0;
  for (int i = 0; i < 2000; ++i) {
    auto l = logits_of(probs);
    const auto id = s.sample(l, {});
    ASSERT_TRUE(id == 3 || id == 1) << id;
    count3 += id == 3;
  }
  EXPECT_NEAR(count3 / 2000.0, 2.0 / 3.0, 0.04);
}

// ------------------------------------------------------------------ repetition penalty

TEST(Sampler, RepeatPenaltyDividesPositiveMultipliesNegativeWithinWindow) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 6;
  Sampler s(p);
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, -1.0f, 3.0f, 0.5f, 0.0f};
  // Window = last 6 = {-1, 1000, 0, 1, 5, 0}: ids 0, 1, 5 penalized once each (0 appears
  // twice); out-of-range ids are ignored; 3 and 2 are older than the window.
  const std::vector<std::int32_t> history = {3, 2, -1, 1000, 0, 1, 5, 0};
  (void)s.sample(logits, history);
  const std::vector<float> expected = {1.0f, -4.0f, 1.0f, -1.0f, 3.0f, 0.25f, 0.0f};
  EXPECT_EQ(logits, expected);
}

TEST(Sampler, RepeatPenaltyWindowCoversWholeShortHistoryAndZeroDisables) {
  std::vector<float> logits = {1.0f, 1.0f, -1.0f};
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 4.0f;
  p.repeat_last_n = 64;  // longer than the history
  (void)Sampler(p).sample(logits, std::vector<std::int32_t>{0, 2});
  EXPECT_EQ(logits, (std::vector<float>{0.25f, 1.0f, -4.0f}));

  p.repeat_last_n = 0;
  std::vector<float> untouched = {1.0f, 1.0f, -1.0f};
  (void)Sampler(p).sample(untouched, std::vector<std::int32_t>{0, 2});
  EXPECT_EQ(untouched, (std::vector<float>{1.0f, 1.0f, -1.0f}));
}

// OpenAI's presence / frequency penalties: logit -= count · frequency + presence for each id seen
// in the window (llama.cpp's penalties sampler: the same window as the repetition penalty,
// which applies first).
TEST(Sampler, PresenceAndFrequencyPenaltiesSubtractPerOccurrenceWithinWindow) {
  SamplingParams p = plain(0.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_last_n = 5;
  std::vector<float> logits = {2.0f, 1.0f, -1.0f, 4.0f, 0.0f};
  // Window = last 5 = {1, 1, 1, 2, 77}: id 1 three times, id 2 once, 77 out of range; 3 and 0
  // are older than the window.
  (void)Sampler(p).sample(logits, std::vector<std::int32_t>{3, 0, 1, 1, 1, 2, 77});
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 1.0f - 0.75f - 0.5f, -1.0f - 0.25f - 0.5f, 4.0f, 0.0f}));

  p.repeat_penalty = 2.0f;  // divides first, then the subtraction
  p.repeat_last_n = -1;     // the whole history: id 3 and id 0 too
  std::vector<float> all = {2.0f, 1.0f, -1.0f, 4.0f, 0.0f};
  (void)Sampler(p).sample(all, std::vector<std::int32_t>{3, 0, 1, 1, 1, 2, 77});
  EXPECT_EQ(all, (std::vector<float>{1.0f - 0.75f, 0.5f - 1.25f, -2.0f - 0.75f, 2.0f - 0.75f, 0.0f}));
}

TEST(Sampler, NegativePresencePenaltyEncouragesRepeats) {
  SamplingParams p = plain(0.0f);
  p.presence_penalty = -2.0f;
  std::vector<float> logits = {3.0f, 1.5f};
  EXPECT_EQ(Sampler(p).sample(logits, std::vector<std::int32_t>{1}), 1);
}

// logit_bias is added before the penalties (llama.cpp's order); an id past the vocabulary is
// ignored; -100 removes a token from the top-k set in practice.
TEST(Sampler, LogitBiasIsAddedBeforeThePenalties) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.logit_bias = {{0, 2.0f}, {2, -100.0f}, {9, 5.0f}};
  std::vector<float> logits = {1.0f, 2.0f, 5.0f};
  EXPECT_EQ(Sampler(p).sample(logits, std::vector<std::int32_t>{0}), 1);
  EXPECT_EQ(logits, (std::vector<float>{1.5f, 2.0f, -95.0f}));
  p.logit_bias = {{1, 10.0f}};
  std::vector<float> boosted = {1.0f, 2.0f, 5.0f};
  const auto dist = Sampler(p).next_token_distribution(boosted, {});
  EXPECT_EQ(dist.front().first, 1);
}

TEST(Sampler, RepeatPenaltyCanChangeTheGreedyChoice) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.1f;
  std::vector<float> logits = {3.0f, 2.9f};
  EXPECT_EQ(Sampler(p).sample(logits, std::vector<std::int32_t>{0}), 1);
}

TEST(Sampler, NeverDrawsAZeroProbabilityToken) {
  // 244 equal logits and one masked (-inf) token. The kept probabilities are float(1/244),
  // which sum to 1 - 5.6e-8; seed 3138459 (found by search) makes the first uniform draw land
  // in that gap. The draw must still be a real token, not the masked one at the end of the
  // candidate list.
  constexpr int kLive = 244;
  std::vector<float> logits(kLive + 1, 0.0f);
  logits[kLive] = -kInf;
  SamplingParams p = plain(1.0f, 3138459);
  // Precondition (keeps the test meaningful): the draw is past the total probability mass.
  double total = 0.0;
  for (const auto& [id, prob] : Sampler(p).distribution(logits)) total += prob;
  std::mt19937_64 rng(p.seed);
  const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  EXPECT_GE(r, total);

  Sampler s(p);
  const auto id = s.sample(logits, {});
  EXPECT_GE(id, 0);
  EXPECT_LT(id, kLive) << "drew the -inf token";
}

// ------------------------------------------------------------------ empirical frequencies

TEST(Sampler, EmpiricalFrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f};
  double z = 0.0;
  for (float l : logits) z += std::exp(l);
  Sampler s(plain(1.0f, 20240601));
  std::vector<int> counts(logits.size(), 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    const auto id = s.sample(l, {});
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 5);
    ++counts[static_cast<std::size_t>(id)];
  }
  for (std::size_t i = 0; i < logits.size(); ++i) {
    EXPECT_NEAR(counts[i] / static_cast<double>(n), std::exp(logits[i]) / z, 0.01) << "token " << i;
  }
}

// ------------------------------------------------------------------ speculative-verification API

// Golden draws recorded with the sampler as it was before next_token_distribution / uniform
// were added (and before the full-vocabulary sort replaced partial_sort): the same seed must
// keep giving the same tokens.
TEST(Sampler, SameSeedGivesTheSameTokensAsBefore) {
  std::mt19937 rng(5);
  const auto logits = random_logits(64, rng, 1.5f);
  SamplingParams filtered;  // defaults: T 0.8, top-k 40, top-p 0.95, min-p 0.05
  filtered.repeat_penalty = 1.3f;
  filtered.seed = 77;
  const std::vector<std::int32_t> golden_plain = {61, 32, 61, 11, 47, 11, 7, 31, 31, 31, 11, 29,
                                                  49, 32, 26, 40, 61, 31, 11, 11, 61, 11, 31, 11};
  const std::vector<std::int32_t> golden_filtered = {11, 29, 31, 56, 7, 29, 29, 31, 49, 11, 53, 31,
                                                     29, 7, 29, 11, 31, 58, 9, 29, 31, 29, 31, 11};
  for (const auto& [p, golden] : {std::pair{plain(1.0f, 42), golden_plain}, std::pair{filtered, golden_filtered}}) {
    Sampler s(p);
    std::vector<std::int32_t> history;  // the draws so far (the penalty's window)
    for (int i = 0; i < 24; ++i) {
      auto l = logits;
      history.push_back(s.sample(l, history));
    }
    EXPECT_EQ(history, golden) << "seed " << p.seed;
  }
}

TEST(Sampler, NextTokenDistributionIsWhatSampleDrawsFrom) {
  std::mt19937 rng(6);
  auto logits = random_logits(40, rng);
  logits[3] = kNaN;
  logits[7] = 9.0f;  // penalized below
  const std::vector<std::int32_t> history = {7, 12, 7, 30};
  SamplingParams p = plain(0.9f, 8);
  p.top_k = 25;
  p.top_p = 0.97f;
  p.min_p = 0.01f;
  p.repeat_penalty = 2.0f;
  for (float t : {0.0f, 0.9f}) {
    p.temperature = t;
    Sampler s(p);
    const auto dist = s.next_token_distribution(logits, history);  // NaN and penalty on a copy
    auto prepared = logits;
    const auto token = s.sample(prepared, history);  // prepares in place, then draws
    EXPECT_EQ(dist, s.distribution(prepared)) << "T " << t;
    EXPECT_NE(dist[0].first, 7) << "the repetition penalty was applied";
    EXPECT_TRUE(std::any_of(dist.begin(), dist.end(), [&](const auto& c) { return c.first == token; }));
    if (t == 0.0f) {
      ASSERT_EQ(dist.size(), 1u);
      EXPECT_EQ(dist[0].first, token);
    }
  }
}

TEST(Sampler, UniformDrawsFromTheSeededStreamSampleUses) {
  const SamplingParams p = plain(1.0f, 123);
  std::mt19937_64 reference(p.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Sampler s(p);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.uniform(), u(reference));
  // sample() at T > 0 consumes exactly one uniform of the same stream; at T = 0 none.
  std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  (void)s.sample(logits, {});
  (void)u(reference);
  EXPECT_EQ(s.uniform(), u(reference));
  EXPECT_EQ(s.params().seed, 123u);
  EXPECT_EQ(s.params().temperature, 1.0f);
}

}  // namespace
}  // namespace peregrine

// The real models (models/real_models.tsv) generate exactly llama.cpp's greedy tokens and
// log-probabilities (tests/reference/llamacpp/NAME.json, tools/llamacpp_reference.py): for
// each of its prompts (raw, and through the chat template for instruct models) up to 64 tokens
// from the same prompt ids, decoded one step at a time through the engine at temperature 0.
// llama.cpp's reference ran with ignore_eos, which bans end-of-generation tokens: where its raw
// argmax was one (its "eog_top" positions) the reply has ended, so the comparison stops there,
// after checking that Peregrine picks that same token. Where the two first differ before that
// it must be a near-tie — both engines rank the same two tokens first and second, within 0.02
// nats of each other — which is reported; the top-10 log-probabilities at the first 16
// generated positions (before any difference) equal llama.cpp's within 1e-3. Each prompt's
// text also tokenizes to the prompt ids llama.cpp evaluated.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "peregrine/engine/engine.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "real_models.h"

namespace peregrine {
namespace {

constexpr std::int32_t kTopLogprobs = 10;
constexpr float kLogprobTolerance = 1e-3f;
constexpr float kNearTie = 0.02f;
constexpr std::size_t kLogprobPositions = 16;

using TopList = std::vector<std::pair<std::int32_t, float>>;

struct Generated {
  std::vector<std::int32_t> tokens;
  std::vector<TopList> top;  // per generated token
};

Generated generate_greedy(const LlamaModel& model, const std::vector<std::int32_t>& prompt, std::int32_t n,
                          ThreadPool& pool) {
  EngineOptions o;
  o.kv = {static_cast<std::int32_t>((prompt.size() + n) / 16 + 2), 16, DType::kF16};  // llama.cpp's default KV type
  o.max_batch_tokens = 512;
  auto engine = Engine::create(model, o, pool);
  EXPECT_TRUE(engine) << engine.status().message();
  Generated out;
  if (!engine) return out;
  RequestOptions r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  r.top_logprobs = kTopLogprobs;
  RequestCallbacks cb{[&out](const TokenEvent& e) {
                        out.tokens.push_back(e.token);
                        out.top.push_back(e.top_logprobs);
                        return true;
                      },
                      [](const RequestResult& res) { EXPECT_EQ(res.reason, FinishReason::kLength) << res.error.message(); }};
  EXPECT_TRUE((*engine)->submit(std::move(r), std::move(cb)));
  while ((*engine)->step()) {}
  return out;
}

TopList reference_top(const nlohmann::json& entry) {
  TopList out;
  for (const auto& p : entry) out.emplace_back(p.at(0).get<std::int32_t>(), p.at(1).get<float>());
  return out;
}

/// At the first differing position: both top-2 lists name the same two tokens, and the two are
/// within kNearTie of each other in both engines.
void expect_near_tie(const std::string& what, std::size_t pos, const TopList& ours, const TopList& theirs) {
  ASSERT_GE(ours.size(), 2u);
  ASSERT_GE(theirs.size(), 2u);
  const bool same_pair = (ours[0].first == theirs[1].first && ours[1].first == theirs[0].first) ||
                         (ours[0].first == theirs[0].first && ours[1].first == theirs[1].first);
  EXPECT_TRUE(same_pair) << what << ": first difference at token " << pos << " is not between the same two tokens";
  EXPECT_LT(ours[0].second - ours[1].second, kNearTie) << what << " position " << pos;
  EXPECT_LT(std::fabs(theirs[0].second - theirs[1].second), kNearTie) << what << " position " << pos;
  std::cout << "[ near-tie ] " << what << ": tokens " << ours[0].first << " / " << ours[1].first << " at generated position "
            << pos << " (peregrine " << ours[0].second << " / " << ours[1].second << ", llama.cpp " << theirs[0].second
            << " / " << theirs[1].second << ")\n";
}

void expect_top_logprobs(const std::string& what, std::size_t pos, const TopList& ours, const TopList& theirs) {
  ASSERT_EQ(ours.size(), theirs.size()) << what << " position " << pos;
  std::map<std::int32_t, float> mine(ours.begin(), ours.end());
  for (std::size_t k = 0; k < theirs.size(); ++k) {
    const auto it = mine.find(theirs[k].first);
    // A token at the edge of the top 10 may trade places with a neighbour within the tolerance.
    if (it == mine.end()) {
      EXPECT_NEAR(theirs[k].second, ours.back().second, kLogprobTolerance)
          << what << " position " << pos << ": llama.cpp's #" << k << " token " << theirs[k].first << " is not in our top 10";
      continue;
    }
    EXPECT_NEAR(it->second, theirs[k].second, kLogprobTolerance) << what << " position " << pos << " token " << theirs[k].first;
  }
}

class RealModelGreedyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModelGreedyTest, TokensAndLogprobsMatchLlamaCpp) {
  const test::RealModelEntry model = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const nlohmann::json ref = test::llamacpp_reference(model.name);
  ASSERT_FALSE(ref.is_null()) << "no tests/reference/llamacpp/" << model.name << ".json";
  const test::LoadedRealModel loaded = test::load_manifest_model(model);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const LlamaModel& llama = *loaded.model;
  const Tokenizer& tok = *loaded.tokenizer;
  ThreadPool pool(2);
  ASSERT_FALSE(ref.at("greedy").empty());
  for (const auto& entry : ref.at("greedy")) {
    const std::string what = model.name + " " + entry.at("name").get<std::string>();
    const auto prompt = entry.at("prompt_tokens").get<std::vector<std::int32_t>>();
    EXPECT_EQ(tok.encode(entry.at("text").get<std::string>(), tok.add_bos_default(), ParseSpecial::kYes), prompt)
        << what << ": the prompt text tokenizes differently";
    const auto want = entry.at("tokens").get<std::vector<std::int32_t>>();
    const auto& top = entry.at("top_logprobs");
    ASSERT_EQ(top.size(), want.size()) << what << ": the reference has no log-probabilities for every token";
    // The reply ends where llama.cpp's raw argmax was an end-of-generation token.
    const auto eog = entry.at("eog_top").get<std::vector<std::size_t>>();
    const std::size_t end = eog.empty() ? want.size() : eog.front();
    const Generated got = generate_greedy(llama, prompt, static_cast<std::int32_t>(want.size()), pool);
    ASSERT_EQ(got.tokens.size(), want.size()) << what;
    std::size_t same = 0;
    while (same < end && got.tokens[same] == want[same]) ++same;
    for (std::size_t pos = 0; pos < std::min(same, kLogprobPositions); ++pos) {
      expect_top_logprobs(what, pos, got.top[pos], reference_top(top[pos]));
    }
    if (same < end) {
      expect_near_tie(what, same, got.top[same], reference_top(top[same]));
    } else if (end < want.size()) {
      EXPECT_EQ(got.tokens[end], reference_top(top[end]).front().first) << what << ": the reply does not end where llama.cpp's does";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, RealModelGreedyTest, ::testing::ValuesIn(test::real_model_names()), test::real_model_test_name);

}  // namespace
}  // namespace peregrine

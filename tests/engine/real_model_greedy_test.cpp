// The real models (models/real_models.tsv) generate llama.cpp's greedy tokens and
// log-probabilities (tests/reference/llamacpp/NAME.json, tools/llamacpp_reference.py) as closely
// as llama.cpp reproduces itself. For each of its prompts (raw, and through the chat template for
// instruct models) Peregrine decodes 64 tokens from the same prompt ids at temperature 0, one
// step at a time, with K/V in f32 as the reference ran ("greedy": llama-server -fa off -ctk f32
// -ctv f32). The yardstick is the reference's second run, "greedy_flash_attn" (-fa on, K/V
// still f32): the same function in another order of floating-point operations. On these small
// quantized models an ulp of difference flips an 8-bit activation rounding somewhere and grows
// over the layers, so the two llama.cpp runs part after a few tokens and their top-10
// log-probabilities differ by tenths of a nat (docs/real_models.md): no engine that does not
// repeat ggml's every operation in ggml's order can meet a tighter bound than llama.cpp's own.
// Per model, against "greedy":
//   - each prompt's text tokenizes to the prompt ids llama.cpp evaluated (exactly);
//   - where Peregrine's reply first parts from llama.cpp's, llama.cpp found Peregrine's token at
//     most kSlack times as much less likely than its own as the largest such gap at which
//     llama.cpp's two runs part, on any model of the manifest (a near-tie on llama.cpp's own
//     scale: 0.40 nats in the references of 2026-11-29);
//   - over the first 16 positions of each reply before it parts, the top-10 log-probabilities
//     differ from llama.cpp's by at most kSlack times as much on average as llama.cpp's second
//     run's do.
// How many leading tokens agree is printed beside llama.cpp's second run's figure, not
// asserted: one early near-tie decides it, so it is the noisiest of these measures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "peregrine/engine/engine.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "real_models.h"

namespace peregrine {
namespace {

constexpr std::int32_t kTopLogprobs = 10;
constexpr std::size_t kLogprobPositions = 16;
// The yardsticks are themselves one draw of a chaotic process (a mean over 400–1500
// log-probabilities, a maximum over 20–30 partings): Peregrine passes within this factor.
constexpr double kSlack = 1.25;

using TopList = std::vector<std::pair<std::int32_t, float>>;

/// One engine's reply to one prompt: its tokens and the top-10 log-probabilities at each.
struct Reply {
  std::vector<std::int32_t> tokens;
  std::vector<TopList> top;
};

Reply generate_greedy(const LlamaModel& model, const std::vector<std::int32_t>& prompt, std::int32_t n,
                      DType kv_type, ThreadPool& pool) {
  EngineOptions o;
  o.kv = {static_cast<std::int32_t>((prompt.size() + n) / 16 + 2), 16, kv_type};
  o.max_batch_tokens = 512;
  auto engine = Engine::create(model, o, pool);
  EXPECT_TRUE(engine) << engine.status().message();
  Reply out;
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

/// A reference entry's reply (its "top_logprobs" cover every generated position).
Reply reference_reply(const nlohmann::json& entry) {
  Reply out;
  out.tokens = entry.at("tokens").get<std::vector<std::int32_t>>();
  for (const auto& position : entry.at("top_logprobs")) {
    TopList list;
    for (const auto& p : position) list.emplace_back(p.at(0).get<std::int32_t>(), p.at(1).get<float>());
    out.top.push_back(std::move(list));
  }
  return out;
}

/// How far a reply lies from llama.cpp's, summed over a model's prompts.
struct Distance {
  std::size_t agreed = 0;         // leading tokens equal to llama.cpp's (up to its reply's end)
  double logprob_abs_sum = 0.0;   // Σ |Δ log p| over the compared entries
  std::size_t logprob_count = 0;  // top-10 entries compared (tokens in both lists)
  float max_gap = 0.0f;           // largest llama.cpp log p gap at a first difference
  double mean() const { return logprob_count > 0 ? logprob_abs_sum / static_cast<double>(logprob_count) : 0.0; }
};

/// Adds `got` against llama.cpp's `want` (whose reply ends at `end`) to `d`; where they first part
/// before `end`, checks that both hold the same two tokens as their best two. Returns that
/// position (or `end`).
std::size_t compare_reply(const std::string& what, const Reply& got, const Reply& want, std::size_t end, Distance& d) {
  std::size_t same = 0;
  while (same < end && got.tokens[same] == want.tokens[same]) ++same;
  d.agreed += same;
  for (std::size_t pos = 0; pos < std::min(same, kLogprobPositions); ++pos) {
    const std::map<std::int32_t, float> mine(got.top[pos].begin(), got.top[pos].end());
    for (const auto& [id, logprob] : want.top[pos]) {
      const auto it = mine.find(id);
      if (it == mine.end()) continue;  // at the edge of one top 10 only
      d.logprob_abs_sum += std::fabs(it->second - logprob);
      ++d.logprob_count;
    }
  }
  if (same < end) {
    // How much likelier llama.cpp found its own token than the one this reply took.
    const TopList& theirs = want.top[same];
    const auto it = std::find_if(theirs.begin(), theirs.end(), [&](const auto& p) { return p.first == got.tokens[same]; });
    const float gap = it == theirs.end() ? INFINITY : theirs.front().second - it->second;
    d.max_gap = std::max(d.max_gap, gap);
    if (!what.empty()) std::cout << "[ parts    ] " << what << " at generated token " << same << ": llama.cpp's log p gap " << gap << "\n";
  }
  return same;
}

/// The largest llama.cpp log p gap at which "greedy_flash_attn" parts from "greedy", over the
/// references of every model of the manifest (read once per test run).
float llamacpp_self_parting_gap_of_all() {
  float gap = 0.0f;
  for (const std::string& name : test::real_model_names()) {
    const nlohmann::json ref = test::llamacpp_reference(name);
    if (ref.is_null() || !ref.contains("greedy_flash_attn")) continue;
    for (std::size_t i = 0; i < ref.at("greedy").size(); ++i) {
      const auto& entry = ref.at("greedy")[i];
      const auto eog = entry.at("eog_top").get<std::vector<std::size_t>>();
      const Reply want = reference_reply(entry);
      Distance d;
      compare_reply({}, reference_reply(ref.at("greedy_flash_attn")[i]), want, eog.empty() ? want.tokens.size() : eog.front(), d);
      gap = std::max(gap, d.max_gap);
    }
  }
  return gap;
}

class RealModelGreedyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModelGreedyTest, AsCloseToLlamaCppAsLlamaCppToItself) {
  const test::RealModelEntry model = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const nlohmann::json ref = test::llamacpp_reference(model.name);
  ASSERT_FALSE(ref.is_null()) << "no tests/reference/llamacpp/" << model.name << ".json";
  ASSERT_TRUE(ref.contains("greedy_flash_attn")) << "regenerate it with tools/llamacpp_reference.py";
  ASSERT_EQ(ref.at("greedy_settings").at("kv_type").get<std::string>(), "f32");
  const test::LoadedRealModel loaded = test::load_manifest_model(model);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const Tokenizer& tok = *loaded.tokenizer;
  ThreadPool pool(2);
  const auto& entries = ref.at("greedy");
  const auto& flash_entries = ref.at("greedy_flash_attn");
  ASSERT_FALSE(entries.empty());
  ASSERT_EQ(flash_entries.size(), entries.size());
  static const float self_gap = llamacpp_self_parting_gap_of_all();
  const float max_gap = kSlack * self_gap;
  ASSERT_GT(max_gap, 0.0f);
  Distance ours, flash;
  std::size_t possible = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& entry = entries[i];
    const std::string what = model.name + " " + entry.at("name").get<std::string>();
    ASSERT_EQ(flash_entries[i].at("name"), entry.at("name"));
    const auto prompt = entry.at("prompt_tokens").get<std::vector<std::int32_t>>();
    EXPECT_EQ(tok.encode(entry.at("text").get<std::string>(), tok.add_bos_default(), ParseSpecial::kYes), prompt)
        << what << ": the prompt text tokenizes differently";
    const Reply want = reference_reply(entry);
    ASSERT_EQ(want.top.size(), want.tokens.size()) << what << ": the reference lacks log-probabilities";
    // The reply ends where llama.cpp's raw argmax was an end-of-generation token.
    const auto eog = entry.at("eog_top").get<std::vector<std::size_t>>();
    const std::size_t end = eog.empty() ? want.tokens.size() : eog.front();
    possible += end;
    const Reply got = generate_greedy(*loaded.model, prompt, static_cast<std::int32_t>(want.tokens.size()),
                                      DType::kF32, pool);
    ASSERT_EQ(got.tokens.size(), want.tokens.size()) << what;
    const float gap_before = ours.max_gap;
    const std::size_t same = compare_reply(what, got, want, end, ours);
    EXPECT_LE(ours.max_gap, std::max(gap_before, max_gap)) << what << ": parts from llama.cpp at token " << same
                                                           << ", which llama.cpp found clearly less likely";
    compare_reply(what + " (llama.cpp -fa on)", reference_reply(flash_entries[i]), want, end, flash);
    if (same == end && end < want.tokens.size()) {
      EXPECT_EQ(got.tokens[end], want.top[end].front().first) << what << ": the reply does not end where llama.cpp's does";
    }
  }
  std::cout << "[ llama.cpp ] " << model.name << ": leading tokens equal to llama.cpp's " << ours.agreed << " of "
            << possible << " (llama.cpp -fa on: " << flash.agreed << "); mean |d log p| over the top 10 "
            << ours.mean() << " over " << ours.logprob_count << " (llama.cpp -fa on: " << flash.mean() << " over "
            << flash.logprob_count << "); largest parting gap " << ours.max_gap << " (allowed " << max_gap << ")\n";
  ASSERT_GT(ours.logprob_count, 0u);
  EXPECT_LE(ours.mean(), kSlack * flash.mean()) << model.name;
}

INSTANTIATE_TEST_SUITE_P(Manifest, RealModelGreedyTest, ::testing::ValuesIn(test::real_model_names()), test::real_model_test_name);

}  // namespace
}  // namespace peregrine

// Grammar-constrained requests through the engine on a real instruct model (SmolLM2-135M-Instruct):
// sampled outputs follow the grammar and end on the model's EOS once the grammar allows nothing
// more; requests with and without a grammar share batches; speculative decoding (PLD) of a
// grammar request gives greedily the tokens of plain decoding (up to a near tie of the logits),
// drafts checked against the grammar, and sampled outputs that follow it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "peregrine/engine/engine.h"
#include "peregrine/sampling/grammar_matcher.h"
#include "near_tie.h"
#include "real_models.h"

namespace peregrine {
namespace {

struct Output {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;  // per token, where the request asked for them
  RequestResult result;
};

// Runs `requests` to the end on one engine; their outputs in order.
std::vector<Output> run_all(const LlamaModel& model, std::vector<RequestOptions> requests) {
  ThreadPool pool(2);
  EngineOptions eo;
  eo.kv = {256, 16, DType::kF32};
  auto engine = Engine::create(model, eo, pool);
  EXPECT_TRUE(engine) << engine.status().message();
  std::vector<Output> out(requests.size());
  if (!engine) return out;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Output& o = out[i];
    RequestCallbacks cb{[&o](const TokenEvent& e) {
                          o.tokens.push_back(e.token);
                          o.logprobs.push_back(e.logprob);
                          return true;
                        },
                        [&o](const RequestResult& res) { o.result = res; }};
    EXPECT_TRUE((*engine)->submit(std::move(requests[i]), std::move(cb)));
  }
  while ((*engine)->step()) {}
  return out;
}

// A request of `prompt` under `grammar` (empty: none), ending on the model's EOS.
RequestOptions constrained(const Tokenizer& tok, std::vector<std::int32_t> prompt, TokenGrammar grammar, float temperature,
                           std::uint64_t seed, std::int32_t max_tokens) {
  RequestOptions r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.eos_id = tok.eos_id();
  r.grammar = std::move(grammar);
  return r;
}

TEST(GrammarEngine, SampledOutputsFollowTheirGrammarsInOneBatch) {
  const test::RealModelEntry entry = test::real_model("smollm2-135m-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const Tokenizer& tok = *loaded.tokenizer;
  const auto trie = TokenTrie::of(tok);
  auto city = Grammar::parse(R"(root ::= "{\"city\": \"" [A-Z] [a-z]{1,15} "\", \"population\": " [1-9] [0-9]{0,8} "}")");
  auto word = Grammar::parse(R"(root ::= " " ("Paris" | "Lyon" | "Nice") ".")");
  ASSERT_TRUE(city && word);
  const TokenGrammar city_grammar = TokenGrammar::of(*city, trie), word_grammar = TokenGrammar::of(*word, trie);

  const std::vector<std::int32_t> prompt = tok.encode("The largest city of France is", tok.add_bos_default());
  constexpr int kSeeds = 2;
  std::vector<RequestOptions> requests;
  for (int i = 0; i < 3 * kSeeds; ++i) {
    const TokenGrammar g = i % 3 == 0 ? city_grammar : i % 3 == 1 ? word_grammar : TokenGrammar{};
    requests.push_back(constrained(tok, prompt, g, 1.0f, static_cast<std::uint64_t>(i), 64));
  }
  const std::vector<Output> out = run_all(*loaded.model, std::move(requests));  // one batch

  const std::regex word_re(R"( (Paris|Lyon|Nice)\.)");
  for (int i = 0; i < 3 * kSeeds; ++i) {
    const Output& o = out[static_cast<std::size_t>(i)];
    if (i % 3 == 2) {  // no grammar: plain sampling, nothing to check but that it ran
      EXPECT_EQ(o.result.completion_tokens, static_cast<std::int64_t>(o.tokens.size()));
      continue;
    }
    ASSERT_EQ(o.result.reason, FinishReason::kStop) << i << ": " << o.result.error.message() << " " << tok.decode(o.tokens);
    const std::string text = tok.decode(o.tokens);  // EOS ended it (the engine does not report it)
    if (i % 3 == 1) {
      EXPECT_TRUE(std::regex_match(text, word_re)) << text;
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j.at("city").is_string() && j.at("population").is_number_integer()) << text;
    std::cout << "  seed " << i << ": " << text << "\n";
  }
}

TEST(GrammarEngine, SpeculativeDecodingFollowsTheGrammarLosslessly) {
  const test::RealModelEntry entry = test::real_model("smollm2-135m-instruct");
  PEREGRINE_REQUIRE_REAL_MODEL(entry);
  const test::LoadedRealModel loaded = test::load_manifest_model(entry);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const Tokenizer& tok = *loaded.tokenizer;
  auto cities = Grammar::parse(R"(root ::= city ("\n" city){2}
city ::= "{\"city\": \"" [A-Z] [a-z]{1,15} "\", \"population\": " [1-9] [0-9]{0,8} "}")");
  ASSERT_TRUE(cities) << cities.status().message();
  const TokenGrammar grammar = TokenGrammar::of(*cities, TokenTrie::of(tok));
  // The prompt repeats the output's pattern, so prompt lookup drafts from it.
  const std::vector<std::int32_t> prompt =
      tok.encode("Cities of France as JSON lines:\n{\"city\": \"Paris\", \"population\": 2100000}\n"
                 "{\"city\": \"Lyon\", \"population\": 520000}\n",
                 tok.add_bos_default());
  std::vector<RequestOptions> requests;
  for (const bool speculate : {false, true, true}) {
    RequestOptions r = constrained(tok, prompt, grammar, requests.size() == 2 ? 1.0f : 0.0f, 7, 96);  // the third samples
    if (speculate) r.spec = SpecParams{SpecMethod::kPld, 4, 1, false};
    r.top_logprobs = 0;
    requests.push_back(std::move(r));
  }
  // Each alone (as generate runs): sharing a batch changes the rows' GEMM shapes, and with them
  // the last bits of near-tied logits.
  std::vector<Output> out;
  for (RequestOptions& r : requests) out.push_back(run_all(*loaded.model, {std::move(r)}).front());
  test::expect_equal_up_to_a_near_tie(*loaded.model, prompt, out[0].tokens, out[1].tokens, tok.eos_id(), &grammar);
  // Logprobs are the model's (before the grammar's mask) either way: where the texts agree, the
  // same up to what the forwards' shapes move (measured: up to 0.12 at AVX2, under 0.1 at AVX-512
  // VNNI); rows after the grammar's mask would raise them where it removed mass (by up to 0.77
  // here, with the mask applied before the logprobs).
  constexpr double kShapeNoise = 0.3;
  double most = 0.0, elsewhere = 0.0;
  for (std::size_t i = 0; i < std::min(out[0].tokens.size(), out[1].tokens.size()) && out[0].tokens[i] == out[1].tokens[i]; ++i) {
    most = std::max(most, static_cast<double>(std::fabs(out[0].logprobs[i] - out[1].logprobs[i])));
    elsewhere = std::max(elsewhere, 1.0 - std::exp(static_cast<double>(out[1].logprobs[i])));
  }
  EXPECT_LT(most, kShapeNoise) << "logprobs of plain and speculative decoding differ";
  EXPECT_GT(elsewhere, 0.5) << "no position where the model put most of its mass on other tokens: nothing told masked from raw rows";
  EXPECT_GT(out[1].result.spec_drafted, 0);
  EXPECT_GT(out[1].result.spec_accepted, 0);
  const std::regex lines(R"((\{"city": "[A-Z][a-z]{1,15}", "population": [1-9][0-9]{0,8}\}\n?){3})");
  for (const Output& o : out) {
    EXPECT_EQ(o.result.reason, FinishReason::kStop) << o.result.error.message();
    EXPECT_TRUE(std::regex_match(tok.decode(o.tokens), lines)) << tok.decode(o.tokens);
  }
  std::cout << "  greedy: " << out[1].result.spec_accepted << " of " << out[1].result.spec_drafted
            << " drafted tokens accepted; sampled: " << tok.decode(out[2].tokens) << "\n";
}

}  // namespace
}  // namespace peregrine

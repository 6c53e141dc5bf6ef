// Grammar-constrained requests through the engine on a real instruct model (SmolLM2-135M-Instruct):
// sampled outputs follow the grammar and end on the model's EOS once the grammar allows nothing
// more; requests with and without a grammar share batches; a speculative request with a grammar
// decodes plainly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "peregrine/engine/engine.h"
#include "peregrine/sampling/grammar_matcher.h"
#include "real_models.h"

namespace peregrine {
namespace {

struct Output {
  std::vector<std::int32_t> tokens;
  RequestResult result;
};

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

  ThreadPool pool(2);
  EngineOptions eo;
  eo.kv = {256, 16, DType::kF32};
  auto engine = Engine::create(*loaded.model, eo, pool);
  ASSERT_TRUE(engine) << engine.status().message();
  const std::vector<std::int32_t> prompt = tok.encode("The largest city of France is", tok.add_bos_default());
  constexpr int kSeeds = 2;
  std::vector<Output> out(3 * kSeeds);
  for (int i = 0; i < 3 * kSeeds; ++i) {
    RequestOptions r;
    r.prompt = prompt;
    r.max_tokens = 64;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<std::uint64_t>(i);
    r.eos_id = tok.eos_id();
    if (i % 3 == 0) r.grammar = city_grammar;
    if (i % 3 == 1) {
      r.grammar = word_grammar;
      r.spec.method = SpecMethod::kPld;  // a grammar request decodes without drafts
      r.spec.draft_max = 4;
    }
    Output& o = out[static_cast<std::size_t>(i)];
    RequestCallbacks cb{[&o](const TokenEvent& e) {
                          o.tokens.push_back(e.token);
                          return true;
                        },
                        [&o](const RequestResult& res) { o.result = res; }};
    ASSERT_TRUE((*engine)->submit(std::move(r), std::move(cb)));
  }
  while ((*engine)->step()) {}

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
      EXPECT_EQ(o.result.spec_drafted, 0) << i;
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j.at("city").is_string() && j.at("population").is_number_integer()) << text;
    std::cout << "  seed " << i << ": " << text << "\n";
  }
}

}  // namespace
}  // namespace peregrine

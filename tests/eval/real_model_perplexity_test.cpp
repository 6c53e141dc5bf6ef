// `eval ppl`'s llama.cpp scoring on the real models (models/real_models.tsv): the first 32 chunks
// of 512 tokens of wikitext-2's test text, each starting with BOS where the model adds one and
// scoring its second half (plan_llamacpp_chunks), K/V in f16 as llama.cpp keeps them: within
// 0.3% of llama-perplexity's figure on the same file (tests/reference/llamacpp/NAME.json).
#include <gtest/gtest.h>

#include <filesystem>

#include "peregrine/eval/perplexity.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "real_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

class RealModelPerplexityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModelPerplexityTest, WithinPointThreePercentOfLlamaPerplexity) {
  const test::RealModelEntry model = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const nlohmann::json ref = test::llamacpp_reference(model.name);
  ASSERT_FALSE(ref.is_null()) << "no tests/reference/llamacpp/" << model.name << ".json";
  const nlohmann::json& want = ref.at("perplexity");
  const test::LoadedRealModel loaded = test::load_manifest_model(model);
  ASSERT_TRUE(loaded.model && loaded.tokenizer);
  const Tokenizer& tok = *loaded.tokenizer;
  const std::string text = test::read_file(test::shared_dir() + "/data/wikitext-2/wiki.test.raw");
  ASSERT_FALSE(text.empty());
  const std::vector<std::int32_t> tokens = tok.encode(text, tok.add_bos_default());
  EvalWindowOptions o{want.at("ctx").get<std::int64_t>(), 0, DType::kF16};
  o.llamacpp_chunks = true;
  o.n_chunks = want.at("chunks").get<std::int64_t>();
  o.chunk_bos = tok.add_bos_default() ? tok.bos_id() : -1;
  ThreadPool pool(2);
  auto r = perplexity(*loaded.model, tokens, o, pool);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->n_windows, o.n_chunks);
  const double theirs = want.at("ppl").get<double>();
  std::cout << "[ perplexity ] " << model.name << ": peregrine " << r->ppl << ", llama-perplexity " << theirs << " ("
            << 100.0 * (r->ppl / theirs - 1.0) << "%)\n";
  EXPECT_NEAR(r->ppl, theirs, 0.003 * theirs);
}

INSTANTIATE_TEST_SUITE_P(Manifest, RealModelPerplexityTest, ::testing::ValuesIn(test::real_model_names()),
                         test::real_model_test_name);

}  // namespace
}  // namespace peregrine

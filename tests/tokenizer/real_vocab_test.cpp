// The real models' vocabularies (models/real_models.tsv) tokenize the committed texts
// (tests/data/real_models/tokenize_texts.json: code, Unicode, CJK, emoji, numbers, whitespace
// runs, special-token text) to exactly llama-tokenize's ids (tests/reference/llamacpp/NAME.json,
// tools/llamacpp_reference.py): with special-token text parsed (llama-tokenize's default) and,
// where recorded, without.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "peregrine/tokenizer/tokenizer.h"
#include "real_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::vector<std::string> tokenize_texts() {
  const std::string path = test::source_dir() + "/tests/data/real_models/tokenize_texts.json";
  const auto texts = nlohmann::json::parse(test::read_file(path), nullptr, false);
  if (!texts.is_array()) {
    ADD_FAILURE() << path << " is not a JSON list of texts";
    return {};
  }
  return texts.get<std::vector<std::string>>();
}

/// Compares every text's ids with the reference's list `key`; reports each differing text.
void expect_same_ids(const Tokenizer& tok, const nlohmann::json& ref, const char* key, ParseSpecial parse) {
  const std::vector<std::string> texts = tokenize_texts();
  ASSERT_TRUE(ref.contains(key)) << "reference has no '" << key << "'";
  const auto& expected = ref.at(key);
  ASSERT_EQ(expected.size(), texts.size()) << "the reference was made from another text list: regenerate it";
  int differing = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::vector<std::int32_t> ids = tok.encode(texts[i], tok.add_bos_default(), parse);
    const auto want = expected[i].get<std::vector<std::int32_t>>();
    if (ids != want) {
      ++differing;
      ADD_FAILURE() << key << " text " << i << " " << nlohmann::json(texts[i]).dump() << "\n  peregrine: "
                    << nlohmann::json(ids).dump() << "\n  llama.cpp: " << nlohmann::json(want).dump();
    }
  }
  EXPECT_EQ(differing, 0) << "of " << texts.size() << " texts";
}

class RealVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocabTest, TokenizesLikeLlamaCpp) {
  const test::RealModelEntry model = test::real_model(GetParam());
  PEREGRINE_REQUIRE_REAL_MODEL(model);
  const nlohmann::json ref = test::llamacpp_reference(model.name);
  ASSERT_FALSE(ref.is_null()) << "no tests/reference/llamacpp/" << model.name
                              << ".json: run tools/llamacpp_reference.py --bin LLAMA_CPP_BIN " << model.name;
  auto tok = load_tokenizer_file(model.path);
  ASSERT_TRUE(tok) << tok.status().message();
  expect_same_ids(**tok, ref, "tokenize", ParseSpecial::kYes);
  if (ref.contains("tokenize_plain")) expect_same_ids(**tok, ref, "tokenize_plain", ParseSpecial::kNo);
}

INSTANTIATE_TEST_SUITE_P(Manifest, RealVocabTest, ::testing::ValuesIn(test::real_model_names()), test::real_model_test_name);

}  // namespace
}  // namespace peregrine

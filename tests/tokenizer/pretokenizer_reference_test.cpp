// The Llama 3 and Qwen2 pre-tokenizers against the regexes of their published tokenizer.json
// files, run by Python's `regex` module (tools/split_pretokens.py): our PCRE2 form of each
// pattern must split real text and hard Unicode cases into exactly the same pieces.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "peregrine/tokenizer/pretokenizer.h"
#include "test_paths.h"
#include "test_util.h"

namespace peregrine {
namespace {

using json = nlohmann::json;
using Pieces = std::vector<std::string>;

// The `Split` patterns of meta-llama/Meta-Llama-3-8B and Qwen/Qwen2-7B tokenizer.json (the
// tiktoken cl100k-style pattern; Qwen2 splits digits one by one).
constexpr const char* kLlama3Published =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Published =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Cases the pattern's alternatives disagree on: contractions in any case, digit runs, CR/LF runs,
// trailing spaces, Unicode whitespace (NBSP, NEL, ideographic space, line separator), combining
// marks (\p{M} is neither L nor N), non-Latin scripts and digits, emoji.
std::vector<std::string> hard_cases() {
  return {
      "I'M sure YOU'LL see it's DON'T we'd they've 'twas",
      "1234567 apples, 3.14159 and 1,000,000 -42",
      "line one\r\nline two\r\n\r\n  indented\n\n\n   \ttabbed  ",
      "trailing spaces   ",
      "nbsp\u00a0here nel\u0085there ideo\u3000space line\u2028sep",
      "cafe\u0301 na\u0308ive \u0928\u092e\u0938\u094d\u0924\u0947",
      "\u4f60\u597d\u4e16\u754c\uff0c\u8fd9\u662f\u6d4b\u8bd5\u3002 \u0645\u0631\u062d\u0628\u0627 \u0661\u0662\u0663\u0664",
      "x\u00b2 + \u2167 \u00bd \U0001F600\U0001F44D\U0001F3FD ok!!",
      "  leading and (brackets) {braces} [x]...?!",
      "",
  };
}

std::vector<std::string> real_texts() {
  auto texts = test::text_lines(test::shared_dir() + "/data/wikitext-2/wiki.test.raw", 400);
  for (auto& t : test::text_lines(test::shared_dir() + "/data/tinystories/tinystories_sample.txt")) texts.push_back(t);
  for (auto& t : hard_cases()) texts.push_back(t);
  return texts;
}

// Python's splits of `texts`, or nullopt after a failure naming what is missing.
std::optional<std::vector<Pieces>> python_splits(const char* pattern, const std::vector<std::string>& texts) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    ADD_FAILURE() << "/usr/bin/python3 not found (scripts/setup.sh installs it)";
    return std::nullopt;
  }
  const std::string dir = test::make_temp_dir();
  std::ofstream(dir + "/in.json") << json{{"pattern", pattern}, {"texts", texts}}.dump();
  const std::string cmd = "/usr/bin/python3 " + test::source_dir() + "/tools/split_pretokens.py < " + dir +
                          "/in.json > " + dir + "/out.json 2> " + dir + "/err.txt";
  const int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
    ADD_FAILURE() << "python3 has no regex module (scripts/setup.sh installs python3-regex)";
    return std::nullopt;
  }
  EXPECT_EQ(rc, 0) << test::read_file(dir + "/err.txt");
  return json::parse(test::read_file(dir + "/out.json")).get<std::vector<Pieces>>();
}

class PublishedPattern : public ::testing::TestWithParam<std::pair<std::string, const char*>> {};

TEST_P(PublishedPattern, SplitsAsPythonRegexDoes) {
  const auto& [name, published] = GetParam();
  auto spec = pretokenizer_spec(name);
  ASSERT_TRUE(spec) << spec.status().message();
  auto pre = PreTokenizer::compile(spec->regexes);
  ASSERT_TRUE(pre) << pre.status().message();
  const auto texts = real_texts();
  const auto expected = python_splits(published, texts);
  ASSERT_TRUE(expected);
  ASSERT_EQ(expected->size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    Pieces ours;
    for (auto w : pre->split(texts[i])) ours.emplace_back(w);
    EXPECT_EQ(ours, (*expected)[i]) << name << " on " << test::escaped(texts[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PublishedPattern,
                         ::testing::Values(std::make_pair(std::string("llama-bpe"), kLlama3Published),
                                           std::make_pair(std::string("qwen2"), kQwen2Published)),
                         [](const auto& info) { return info.param.first == "qwen2" ? "qwen2" : "llama_bpe"; });

}  // namespace
}  // namespace peregrine

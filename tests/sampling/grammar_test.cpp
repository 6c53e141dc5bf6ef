// GBNF grammars (sampling/grammar.h) and the token-level matcher (sampling/grammar_matcher.h)
// over real vocabularies: texts the grammar generates are accepted token by token with every
// token inside the mask, texts it does not are refused, bad grammars are one clear error, and
// the trie walk's mask equals checking every token of the vocabulary one by one.
#include "peregrine/sampling/grammar_matcher.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "peregrine/tokenizer/tokenizer.h"
#include "grammar_text.h"
#include "test_models.h"

namespace peregrine {
namespace {

const Tokenizer& llama_spm() { return test::llamacpp_vocab("llama-spm"); }
const Tokenizer& gpt2() { return test::llamacpp_vocab("gpt-2"); }

std::shared_ptr<const Grammar> parse(std::string_view gbnf) {
  auto g = Grammar::parse(gbnf);
  EXPECT_TRUE(g) << g.status().message();
  return g ? *g : nullptr;
}

TEST(Grammar, JsonObjectGrammarTakesJsonTextsAndRefusesOthers) {
  for (const Tokenizer* tok : {&llama_spm(), &gpt2()}) {
    const auto trie = TokenTrie::of(*tok);
    const auto json = parse(json_object_gbnf());
    for (std::string_view good : {R"({"a": [1, 2.5e3, -0.25, "x\u00e9y", "é≈😀"], "b": null, "c": {"d": true}})", R"({})",
                                  "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}"}) {
      const test::TextRun r = test::run(*tok, trie, json, good);
      EXPECT_TRUE(r.accepted) << tok->kind() << ": " << good;
      EXPECT_TRUE(r.complete) << tok->kind() << ": " << good;
    }
    for (std::string_view bad : {R"({"a" 1})", R"([1, 2])", R"({"a": 01})", R"({"a": tru})", "{\"a\":\t1}"}) {
      const test::TextRun r = test::run(*tok, trie, json, bad);
      EXPECT_FALSE(r.accepted && r.complete) << tok->kind() << ": " << bad;
    }
    const test::TextRun unfinished = test::run(*tok, trie, json, R"({"a": [1,)");
    EXPECT_TRUE(unfinished.accepted);
    EXPECT_FALSE(unfinished.complete);
  }
}

TEST(Grammar, RepetitionsClassesAndGroups) {
  const Tokenizer& tok = llama_spm();
  const auto trie = TokenTrie::of(tok);
  const auto g = parse(R"(# a comment
root ::= word ("," " "? word){0,2} "."   # trailing comment
word ::= [a-c]{2,3} | "x"+ | [^a-z,. ]
)");
  for (std::string_view good : {"ab.", "abc, x, xxxx.", "Q.", "ab,ca,bb."}) EXPECT_TRUE(test::run(tok, trie, g, good).complete) << good;
  for (std::string_view bad : {"a.", "abcd.", "ab, ab, ab, ab.", "ab", "d."}) {
    const test::TextRun r = test::run(tok, trie, g, bad);
    EXPECT_FALSE(r.accepted && r.complete) << bad;
  }
}

// The trie walk gives exactly the tokens that accept() takes, at several states of a JSON text
// (inside a string, after a key, inside a number), for a 32k SentencePiece vocabulary.
TEST(GrammarMatcher, MaskEqualsCheckingEveryToken) {
  const Tokenizer& tok = llama_spm();
  const auto trie = TokenTrie::of(tok);
  const TokenGrammar tg = TokenGrammar::of(parse(json_object_gbnf()), trie);
  const std::string text = R"({"key é": [12.5, "v)";
  GrammarMatcher m(tg, tok.eos_id());
  GrammarMatcher plain(tg, tok.eos_id());  // never masked: its copies carry no cached masks
  std::vector<float> logits(static_cast<std::size_t>(tok.vocab_size()));
  std::int64_t states = 0;
  for (std::int32_t id : test::spell(*trie, text)) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const std::int64_t n = m.mask(logits);
    std::int64_t brute = 0;
    for (std::int32_t t = 0; t < tok.vocab_size(); ++t) {
      GrammarMatcher copy = plain;
      const bool ok = copy.accept(t).is_ok();
      brute += ok ? 1 : 0;
      ASSERT_EQ(ok, !std::isinf(logits[static_cast<std::size_t>(t)])) << "token " << t << " '" << trie->bytes(t) << "' after "
                                                                     << states << " tokens";
    }
    EXPECT_EQ(n, brute);
    EXPECT_GT(n, 0);
    ASSERT_TRUE(m.accept(id));
    ASSERT_TRUE(plain.accept(id));
    ++states;
  }
  EXPECT_GE(states, 8);
}

TEST(GrammarMatcher, EosOnlyWhenCompleteAndAloneWhenNothingMayFollow) {
  const Tokenizer& tok = llama_spm();
  const auto trie = TokenTrie::of(tok);
  GrammarMatcher m(TokenGrammar::of(parse(R"(root ::= "yes" | "yes!")"), trie), tok.eos_id());
  std::vector<float> logits(static_cast<std::size_t>(tok.vocab_size()), 0.0f);
  m.mask(logits);
  EXPECT_TRUE(std::isinf(logits[static_cast<std::size_t>(tok.eos_id())]));
  for (std::int32_t id : test::spell(*trie, "yes")) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.must_end());
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_GE(m.mask(logits), 2);  // "!" and EOS
  EXPECT_FALSE(std::isinf(logits[static_cast<std::size_t>(tok.eos_id())]));
  for (std::int32_t id : test::spell(*trie, "!")) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.must_end());
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_EQ(m.mask(logits), 1);
  const Status refused = m.accept(test::spell(*trie, "!").back());
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(m.accept(tok.eos_id()));
}

TEST(Grammar, BadGrammarsAreOneClearError) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= [a-", "line 1 column 13"},
      {"root ::= \"abc", "unterminated string"},
      {"root ::= item", "'item' is used but not defined"},
      {"item ::= \"a\"", "no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= [z-a]", "empty character range"},
      {"root ::= \"a\"{3,1}", "m > n"},
      {"root ::= \"a\"{99999}", "above 10000"},
      {"root ::= * \"a\"", "repeats nothing"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"", "left-recursive"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"\\x4\"", "hex digits"},
      {"root \"a\"", "expected '::='"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root ::= \"a\" ]", "end of the line"},
  };
  // Hostile sizes: one clear error, no stack or memory blow-up.
  std::string deep = "root ::= ";
  deep.append(5000, '(').append("\"a\"").append(5000, ')');
  const std::string chain = [] {
    std::string g = "root ::= r0\n";
    for (int i = 0; i < 30000; ++i) g.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1)).append("\n");
    return g.append("r30000 ::= \"a\"\n");
  }();
  const std::pair<std::string, const char*> hostile[] = {
      {deep, "nested more than 100"},
      {"root ::= \"abcdefgh\"{10000}{10000}", "1048576 elements"},
      {chain, "more than 20000 rules"},
  };
  for (const auto& [gbnf, what] : hostile) {
    auto g = Grammar::parse(gbnf);
    ASSERT_FALSE(g) << gbnf.substr(0, 40);
    EXPECT_NE(g.status().message().find(what), std::string::npos) << g.status().message();
  }
  for (const auto& [gbnf, what] : cases) {
    auto g = Grammar::parse(gbnf);
    ASSERT_FALSE(g) << gbnf;
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument) << gbnf;
    EXPECT_NE(g.status().message().find(what), std::string::npos) << gbnf << " → " << g.status().message();
  }
}

TEST(CharSet, ContainsAndIntersectsRangesAndTheirComplement) {
  const CharSet digits{{{'0', '9'}}, false}, not_quote{{{'"', '"'}, {'\\', '\\'}}, true};
  EXPECT_TRUE(digits.contains('5'));
  EXPECT_FALSE(digits.contains('a'));
  EXPECT_TRUE(not_quote.contains(0x1F600));
  EXPECT_FALSE(not_quote.contains('"'));
  EXPECT_TRUE(digits.intersects('9', 0x80));
  EXPECT_FALSE(digits.intersects(0x80, 0x7FF));
  EXPECT_FALSE(not_quote.intersects('"', '"'));
  EXPECT_TRUE(not_quote.intersects('"', '#'));
  EXPECT_FALSE((CharSet{{{0, 0x10FFFF}}, true}).intersects(0x80, 0x7FF));
}

}  // namespace
}  // namespace peregrine

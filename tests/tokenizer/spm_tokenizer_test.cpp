// SentencePiece-style BPE: llama2.c tokenizer.bin, GGUF "llama" vocabularies, and agreement
// with libsentencepiece on real text.
#include "peregrine/tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "peregrine/tokenizer/gguf_tokenizer.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "peregrine/tokenizer/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace peregrine {
namespace {

std::string stories_tok() { return test::shared_dir() + "/models/stories260K/tok512.bin"; }
std::string llama2_dir() { return test::shared_dir() + "/tokenizers/llama2"; }

// The TinyStories lines (long paragraphs), each followed by its sentences (split at ". ").
std::vector<std::string> tinystories_lines() {
  auto lines = test::text_lines(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
  for (auto& l : test::text_lines(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt")) {
    lines.push_back(std::move(l));
  }
  std::vector<std::string> out;
  for (const auto& l : lines) {
    out.push_back(l);
    for (std::size_t pos = 0; pos < l.size();) {
      const std::size_t end = std::min(l.find(". ", pos), l.size());
      out.push_back(l.substr(pos, end - pos));
      pos = end + 2;
    }
  }
  return out;
}

std::vector<std::string> wikitext_lines() {
  return test::text_lines(test::shared_dir() + "/data/wikitext-2/wiki.test.raw", 300);
}

std::vector<std::string> vector_inputs() {
  return test::split_inputs(test::read_file(test::vocab_dir() + "/ggml-vocab-llama-spm.gguf.inp"));
}

std::unique_ptr<Tokenizer> must_load(Expected<std::unique_ptr<Tokenizer>> t) {
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(t).value() : nullptr;
}

TEST(SpmTokenizer, Stories260KOnceUponATime) {
  auto tok = must_load(load_llama2c_tokenizer(stories_tok()));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->kind(), "spm");
  const std::vector<std::int32_t> want = {1, 403, 407, 261, 378};
  EXPECT_EQ(tok->encode("Once upon a time", true), want);
  // The vocabulary itself says so: these are the pieces "▁Once", "▁upon", "▁a", "▁time".
  EXPECT_EQ(tok->piece(403), "\xE2\x96\x81Once");
  EXPECT_EQ(tok->piece(407), "\xE2\x96\x81upon");
  EXPECT_EQ(tok->piece(261), "\xE2\x96\x81" "a");
  EXPECT_EQ(tok->piece(378), "\xE2\x96\x81time");
  EXPECT_EQ(tok->piece(1), "<s>");
  EXPECT_EQ(tok->decode(want), "Once upon a time");
}

TEST(SpmTokenizer, DecodeRules) {
  auto tok = must_load(load_llama2c_tokenizer(stories_tok()));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->decode_token(-1, 403), "Once");     // leading space dropped at the start
  EXPECT_EQ(tok->decode_token(1, 403), "Once");      // ... and right after BOS
  EXPECT_EQ(tok->decode_token(403, 407), " upon");   // kept elsewhere
  EXPECT_EQ(tok->decode_token(403, 1), "");          // control tokens vanish
  EXPECT_EQ(tok->decode_token(403, 2), "");
  EXPECT_EQ(tok->decode_token(403, 3 + 0x0A), "\n");  // <0x0A>
  EXPECT_EQ(tok->decode_token(403, 99999), "");      // out of range: nothing
  EXPECT_EQ(tok->piece(-1), "");
  // Byte fallback: a character outside the 512-token vocabulary comes back byte by byte.
  const std::string text = "Zo\xC3\xAB saw \xE6\xBC\xA2 5";  // "Zoë saw 漢 5"
  const auto ids = tok->encode(text, false);
  EXPECT_EQ(tok->decode(ids), text);
  const std::vector<std::int32_t> han = {3 + 0xE6, 3 + 0xBC, 3 + 0xA2};
  EXPECT_NE(std::search(ids.begin(), ids.end(), han.begin(), han.end()), ids.end()) << test::ids_string(ids);
}

TEST(SpmTokenizer, EmptyAndSpaces) {
  auto tok = must_load(load_llama2c_tokenizer(stories_tok()));
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_EQ(tok->encode("", true), std::vector<std::int32_t>{1});
  for (const std::string s : {" ", "  ", " a", "a ", "\n", " \n "}) {
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s) << test::escaped(s);
  }
}

TEST(SpmTokenizer, Llama2BinMatchesSentencePieceModel) {
  auto bin = must_load(load_llama2c_tokenizer(llama2_dir() + "/tokenizer.bin"));
  auto model = must_load(load_sentencepiece_model(llama2_dir() + "/tokenizer.model"));
  ASSERT_TRUE(bin && model);
  EXPECT_EQ(bin->vocab_size(), 32000);
  EXPECT_EQ(model->vocab_size(), 32000);
  auto texts = tinystories_lines();
  for (auto& t : vector_inputs()) texts.push_back(t);
  for (auto& t : wikitext_lines()) texts.push_back(t);
  ASSERT_GT(texts.size(), 500u);
  std::size_t mismatches = 0;
  for (const auto& t : texts) {
    const auto a = bin->encode(t, true);
    const auto b = model->encode(t, true);
    if (a != b) {
      ++mismatches;
      ADD_FAILURE() << test::escaped(t) << "\n  tokenizer.bin   " << test::ids_string(a)
                    << "\n  tokenizer.model " << test::ids_string(b);
    }
    EXPECT_EQ(model->decode(b), t) << test::escaped(t);
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(SpmTokenizer, DecodeTokenMatchesSentencePieceModelForEveryId) {
  // Both decode through the same piece rules: "▁" → ' ', dummy-prefix space dropped at the
  // start and after BOS only, <0xXX> → byte, control → "", unknown → " ⁇ ".
  auto bin = must_load(load_llama2c_tokenizer(llama2_dir() + "/tokenizer.bin"));
  auto model = must_load(load_sentencepiece_model(llama2_dir() + "/tokenizer.model"));
  ASSERT_TRUE(bin && model);
  const std::int32_t the = model->encode("the", false).at(0);
  for (std::int32_t prev : {-1, model->bos_id(), the}) {
    for (std::int32_t id = 0; id < model->vocab_size(); ++id) {
      ASSERT_EQ(bin->decode_token(prev, id), model->decode_token(prev, id)) << "prev " << prev << " id " << id;
    }
  }
  EXPECT_EQ(model->decode_token(-1, the), "the");
  EXPECT_EQ(model->decode_token(the, the), " the");
  EXPECT_EQ(model->decode_token(-1, 0), " \xE2\x81\x87 ");
  EXPECT_EQ(model->decode_token(-1, model->eos_id()), "");
}

TEST(SpmTokenizer, Llama2BinMatchesLlamaSpmGguf) {
  auto bin = must_load(load_llama2c_tokenizer(llama2_dir() + "/tokenizer.bin"));
  auto gguf = must_load(load_gguf_tokenizer_file(test::vocab_dir() + "/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(bin && gguf);
  for (std::int32_t id = 0; id < 32000; id += 97) EXPECT_EQ(bin->piece(id), gguf->piece(id)) << id;
  for (const auto& t : tinystories_lines()) EXPECT_EQ(bin->encode(t, true), gguf->encode(t, true)) << t;
}

TEST(SpmTokenizer, Stories260KGgufMatchesTok512) {
  auto bin = must_load(load_llama2c_tokenizer(stories_tok()));
  auto gguf = must_load(load_gguf_tokenizer_file(test::shared_dir() + "/models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(bin && gguf);
  EXPECT_EQ(gguf->bos_id(), 1);
  EXPECT_EQ(gguf->eos_id(), 2);
  for (const auto& t : tinystories_lines()) EXPECT_EQ(bin->encode(t, true), gguf->encode(t, true)) << t;
}

TEST(SpmTokenizer, RoundTripsRealText) {
  std::vector<std::unique_ptr<Tokenizer>> toks;
  toks.push_back(must_load(load_llama2c_tokenizer(stories_tok())));
  toks.push_back(must_load(load_llama2c_tokenizer(test::shared_dir() + "/models/aidreams260K/tok512.bin")));
  toks.push_back(must_load(load_llama2c_tokenizer(llama2_dir() + "/tokenizer.bin")));
  auto texts = tinystories_lines();
  for (auto& t : wikitext_lines()) texts.push_back(t);
  for (const auto& tok : toks) {
    ASSERT_TRUE(tok);
    for (const auto& t : texts) {
      EXPECT_EQ(tok->decode(tok->encode(t, false)), t) << test::escaped(t);
      EXPECT_EQ(tok->decode(tok->encode(t, true)), t) << test::escaped(t);
    }
  }
}

TEST(SpmTokenizer, ScoresDecideMergesTiesGoLeft) {
  // Toy vocabulary: "ab" outscores "bc", so "abc" → ab + c; equal scores → leftmost first.
  Vocab v;
  v.pieces = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc", "\xE2\x96\x81"};
  v.scores = {0, 0, 0, -10, -10, -10, -1, -2, -5};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal,
             TokenType::kNormal, TokenType::kNormal, TokenType::kNormal, TokenType::kNormal, TokenType::kNormal};
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  ASSERT_TRUE(v.finalize("toy").is_ok());
  Vocab tie = v;
  tie.scores[7] = -1;
  ASSERT_TRUE(tie.finalize("toy").is_ok());
  SpmOptions opt;
  opt.add_space_prefix = false;
  auto a = SpmTokenizer::create(std::move(v), opt);
  auto b = SpmTokenizer::create(std::move(tie), opt);
  EXPECT_EQ(a->encode("abc", false), (std::vector<std::int32_t>{6, 5}));
  EXPECT_EQ(b->encode("abc", false), (std::vector<std::int32_t>{6, 5}));
  EXPECT_EQ(a->encode("bca", false), (std::vector<std::int32_t>{7, 3}));
  // No byte tokens in this vocabulary: unknown characters become <unk>.
  EXPECT_EQ(a->encode("xa", false), (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(a->decode_token(3, 0), " \xE2\x81\x87 ");
}

}  // namespace
}  // namespace peregrine

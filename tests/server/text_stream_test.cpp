#include "peregrine/server/text_stream.h"

#include <gtest/gtest.h>

#include "server_test_util.h"

namespace peregrine {
namespace {

// Characters of 2, 3 and 4 UTF-8 bytes that both vocabularies split across tokens.
const std::string kMultibyte = "Tom said: \xE2\x80\x9C" "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80\xE2\x80\x9D and left.";

struct Streamed {
  std::vector<std::string> pieces;  // what push() released, per token
  std::string text;                 // all released text, flush() included
  bool stopped = false;
  std::size_t stop_token = 0;       // index of the token whose push() stopped the stream
};

Streamed stream_all(const Tokenizer& tok, const std::vector<std::int32_t>& ids, std::vector<std::string> stop) {
  TextStream s(tok, -1, std::move(stop));
  Streamed out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    out.pieces.push_back(s.push(ids[i]));
    out.text += out.pieces.back();
    if (s.stopped() && !out.stopped) {
      out.stopped = true;
      out.stop_token = i;
    }
  }
  out.text += s.flush();
  EXPECT_EQ(s.released_bytes(), out.text.size());
  return out;
}

/// Whether some token's bytes are not a whole number of characters (so holdback matters).
bool splits_a_character(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  std::int32_t prev = -1;
  for (std::int32_t id : ids) {
    if (!test::valid_utf8(tok.decode_token(prev, id))) return true;
    prev = id;
  }
  return false;
}

void expect_whole_characters(const Tokenizer& tok) {
  const std::vector<std::int32_t> ids = tok.encode(kMultibyte, false);
  ASSERT_TRUE(splits_a_character(tok, ids)) << tok.kind() << ": no character split across tokens; test text too easy";
  const Streamed s = stream_all(tok, ids, {});
  for (const auto& piece : s.pieces) EXPECT_TRUE(test::valid_utf8(piece)) << tok.kind() << " released a partial character";
  EXPECT_EQ(s.text, tok.decode(ids));
  EXPECT_FALSE(s.stopped);
}

TEST(TextStream, HoldsBackCharactersSplitAcrossByteFallbackTokens) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  expect_whole_characters(*tok);
  EXPECT_EQ(tok->decode(tok->encode(kMultibyte, false)), kMultibyte);
}

TEST(TextStream, HoldsBackCharactersSplitAcrossGpt2ByteLevelTokens) {
  auto tok = test::gpt2_tokenizer();
  ASSERT_TRUE(tok);
  expect_whole_characters(*tok);
  EXPECT_EQ(tok->decode(tok->encode(kMultibyte, false)), kMultibyte);
}

TEST(TextStream, StopStringSpanningTokensCutsTheTextBeforeIt) {
  for (const auto& tok : {test::stories_tokenizer(), test::gpt2_tokenizer()}) {
    ASSERT_TRUE(tok);
    const std::string text = "Once upon a time, there was a little girl named Lily. She liked to play.";
    const std::vector<std::int32_t> ids = tok->encode(text, false);
    const Streamed s = stream_all(*tok, ids, {"girl named"});
    ASSERT_TRUE(s.stopped) << tok->kind();
    EXPECT_EQ(s.text, "Once upon a time, there was a little ");
    // The stop string spans several tokens, and the stream stopped at the one completing it.
    const std::string through_stop = tok->decode(std::span(ids).first(s.stop_token + 1));
    EXPECT_NE(through_stop.find("girl named"), std::string::npos);
    EXPECT_EQ(tok->decode(std::span(ids).first(s.stop_token)).find("girl named"), std::string::npos);
    EXPECT_GT(tok->encode("girl named", false).size(), 1u);
    for (std::size_t i = s.stop_token + 1; i < s.pieces.size(); ++i) EXPECT_EQ(s.pieces[i], "");
  }
}

TEST(TextStream, PartialStopMatchesAreReleasedOnceTheyCannotComplete) {
  auto tok = test::gpt2_tokenizer();
  ASSERT_TRUE(tok);
  const std::string text = "The little dog ran. The little cat sat";
  const std::vector<std::int32_t> ids = tok->encode(text, false);
  const Streamed s = stream_all(*tok, ids, {"little bird", "cat sat!"});
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, text);
  // The final "cat sat" could still become "cat sat!": only flush() releases it.
  std::string before_flush;
  for (const auto& p : s.pieces) before_flush += p;
  EXPECT_EQ(before_flush, "The little dog ran. The little ");
}

TEST(TextStream, EarliestOfSeveralStopStringsWins) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<std::int32_t> ids = tok->encode("She had a red ball and a blue kite.", false);
  const Streamed s = stream_all(*tok, ids, {"kite", "", "ball"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "She had a red ");
  TextStream one(*tok, -1, {"kite", "ball"});
  EXPECT_EQ(one.matched_stop(), "");
  for (std::int32_t id : ids) one.push(id);
  EXPECT_EQ(one.matched_stop(), "ball");  // the earliest in the text, not the first listed
}

TEST(TextStream, FirstPieceDecodesAfterThePromptsLastToken) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<std::int32_t> prompt = tok->encode("Once upon a time", true);
  const std::vector<std::int32_t> whole = tok->encode("Once upon a time there was", true);
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), whole.begin()));
  TextStream s(*tok, prompt.back(), {});
  std::string text;
  for (std::size_t i = prompt.size(); i < whole.size(); ++i) text += s.push(whole[i]);
  text += s.flush();
  EXPECT_EQ(text, " there was");
}

TEST(TextStream, IncompleteUtf8Suffix) {
  EXPECT_EQ(incomplete_utf8_suffix(""), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xC3\xA9"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("\xE4\xBD\xA0"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("x\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("\x80\x80\x80\x80"), 0u);  // stray continuation bytes: nothing to wait for
}

}  // namespace
}  // namespace peregrine

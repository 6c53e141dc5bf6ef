// Reasoning split from the answer (server/reasoning.h): a <think> block opened by the reply or
// by the prompt becomes reasoning, however the text is streamed; replies without one are all
// content; an unterminated block is all reasoning.
#include "peregrine/server/reasoning.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

ReasoningParser::Split split(ReasoningStart start, std::string_view text, std::size_t step) {
  ReasoningParser p(start);
  ReasoningParser::Split out;
  for (std::size_t i = 0; i < text.size(); i += step) {
    ReasoningParser::Split s = p.push(text.substr(i, step));
    out.reasoning += s.reasoning;
    out.content += s.content;
  }
  ReasoningParser::Split s = p.flush();
  out.reasoning += s.reasoning;
  out.content += s.content;
  return out;
}

TEST(Reasoning, ThinkBlocksBecomeReasoningAnyWayTheTextIsSplit) {
  for (std::size_t step : {1, 2, 3, 7, 100}) {
    const auto opened = split(ReasoningStart::kDetect, "\n<think>\nLet me add: 2 + 2.</thi nk? no</think>\n\nThe answer is 4.", step);
    EXPECT_EQ(opened.reasoning, "\nLet me add: 2 + 2.</thi nk? no") << step;
    EXPECT_EQ(opened.content, "The answer is 4.") << step;
    const auto in_prompt = split(ReasoningStart::kInside, "Hmm, 4.\n</think>\n\n4", step);
    EXPECT_EQ(in_prompt.reasoning, "Hmm, 4.\n");
    EXPECT_EQ(in_prompt.content, "4");
    const auto none = split(ReasoningStart::kDetect, " <thinking> is a word; 4", step);
    EXPECT_EQ(none.reasoning, "");
    EXPECT_EQ(none.content, " <thinking> is a word; 4");
    const auto cut = split(ReasoningStart::kInside, "still thinking </thi", step);
    EXPECT_EQ(cut.reasoning, "still thinking </thi");
    EXPECT_EQ(cut.content, "");
  }
}

TEST(Reasoning, StartFollowsThePromptsLastCharacters) {
  EXPECT_EQ(reasoning_start("<|Assistant|><think>\n"), ReasoningStart::kInside);
  EXPECT_EQ(reasoning_start("<think>"), ReasoningStart::kInside);
  EXPECT_EQ(reasoning_start("<|im_start|>assistant\n"), ReasoningStart::kDetect);
  EXPECT_EQ(reasoning_start("</think>\n"), ReasoningStart::kDetect);
  EXPECT_EQ(reasoning_start(""), ReasoningStart::kDetect);
}

}  // namespace
}  // namespace peregrine

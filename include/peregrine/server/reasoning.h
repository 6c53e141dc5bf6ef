// Reasoning ("thinking") text split from the answer, as llama-server's --reasoning-format does
// for DeepSeek-R1 and its distills, Qwen3, QwQ: what the model writes between <think> and
// </think> becomes message.reasoning_content (streamed as delta.reasoning_content), the rest the
// content, free of the tags. The block opens either in the reply's first characters or in the
// prompt itself (R1 distills' templates end the generation prompt with "<think>\n").
#pragma once

#include <string>
#include <string_view>

namespace peregrine {

/// Where the reply starts: no parsing (--reasoning-format none), maybe opening <think> itself,
/// or already inside the block (the prompt ended with <think>).
enum class ReasoningStart { kOff, kDetect, kInside };

/// kInside when `prompt_tail` (the rendered prompt's last characters) ends with "<think>" and
/// optional whitespace, else kDetect.
ReasoningStart reasoning_start(std::string_view prompt_tail);

class ReasoningParser {
 public:
  struct Split {
    std::string reasoning, content;
  };
  /// Precondition: start != kOff.
  explicit ReasoningParser(ReasoningStart start);
  /// Appends streamed text; returns what can be released now (a possible "<think>" or
  /// "</think>" prefix held back).
  Split push(std::string_view text);
  /// At the end: the held-back text (an unterminated block is all reasoning).
  Split flush();

 private:
  enum class State { kDetect, kInside, kAfter, kContent };
  State state_;
  std::string pending_;
};

}  // namespace peregrine

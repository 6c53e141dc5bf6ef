#include "peregrine/server/reasoning.h"

#include <algorithm>

#include "peregrine/server/text_stream.h"

namespace peregrine {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kSpace = " \t\r\n";


}  // namespace

ReasoningStart reasoning_start(std::string_view prompt_tail) {
  const auto end = prompt_tail.find_last_not_of(kSpace);
  return end != std::string_view::npos && prompt_tail.substr(0, end + 1).ends_with(kOpen) ? ReasoningStart::kInside
                                                                                          : ReasoningStart::kDetect;
}

ReasoningParser::ReasoningParser(ReasoningStart start)
    : state_(start == ReasoningStart::kInside ? State::kInside : State::kDetect) {}

ReasoningParser::Split ReasoningParser::push(std::string_view text) {
  pending_ += text;
  Split out;
  while (true) {
    switch (state_) {
      case State::kDetect: {
        const auto first = pending_.find_first_not_of(kSpace);
        if (first == std::string::npos) return out;
        const std::string_view rest = std::string_view(pending_).substr(first);
        if (rest.starts_with(kOpen)) {
          pending_.erase(0, first + kOpen.size());
          state_ = State::kInside;
          continue;
        }
        if (kOpen.starts_with(rest)) return out;  // maybe "<thi": wait
        state_ = State::kContent;
        continue;
      }
      case State::kInside: {
        const auto close = pending_.find(kClose);
        if (close == std::string::npos) {
          const std::size_t keep = partial_marker(pending_, kClose);
          out.reasoning += pending_.substr(0, pending_.size() - keep);
          pending_.erase(0, pending_.size() - keep);
          return out;
        }
        out.reasoning += pending_.substr(0, close);
        pending_.erase(0, close + kClose.size());
        state_ = State::kAfter;
        continue;
      }
      case State::kAfter: {  // the whitespace between </think> and the answer is neither
        const auto first = pending_.find_first_not_of(kSpace);
        if (first == std::string::npos) {
          pending_.clear();
          return out;
        }
        pending_.erase(0, first);
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content += pending_;
        pending_.clear();
        return out;
    }
  }
}

ReasoningParser::Split ReasoningParser::flush() {
  Split out;
  if (state_ == State::kInside) {
    out.reasoning = std::move(pending_);
  } else if (state_ != State::kAfter) {
    out.content = std::move(pending_);
  }
  pending_.clear();
  return out;
}

}  // namespace peregrine

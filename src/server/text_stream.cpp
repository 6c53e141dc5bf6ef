#include "peregrine/server/text_stream.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace peregrine {
namespace {

/// Length of the UTF-8 character a lead byte announces (1 for ASCII and invalid bytes,
/// 0 for a continuation byte).
std::size_t announced_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xC0) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF8) return 4;
  return 1;
}

}  // namespace

std::size_t partial_marker(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::size_t incomplete_utf8_suffix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the lead byte.
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, text.size()); ++back) {
    const std::size_t need = announced_length(static_cast<unsigned char>(text[text.size() - back]));
    if (need == 0) continue;      // continuation byte: keep looking for the lead
    return need > back ? back : 0;  // the character is complete (or the byte is invalid)
  }
  return 0;
}

TextStream::TextStream(const Tokenizer& tokenizer, std::int32_t prev_token, std::vector<std::string> stop)
    : tokenizer_(tokenizer), prev_(prev_token) {
  for (auto& s : stop) {
    if (!s.empty()) stop_.push_back(std::move(s));
  }
}

std::string TextStream::push(std::int32_t id) {
  if (stopped_) return {};
  pending_ += tokenizer_.decode_token(prev_, id);
  prev_ = id;
  std::size_t first_stop = std::string::npos;
  for (const auto& s : stop_) {
    const std::size_t at = pending_.find(s);
    if (at < first_stop) {
      first_stop = at;
      matched_stop_ = s;
    }
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = release(first_stop);
    pending_.clear();
    return out;
  }
  return release(pending_.size() - holdback());
}

std::string TextStream::flush() {
  if (stopped_) return {};
  return release(pending_.size());
}

std::size_t TextStream::holdback() const {
  std::size_t hold = incomplete_utf8_suffix(pending_);
  for (const auto& s : stop_) hold = std::max(hold, partial_marker(pending_, s));
  return hold;
}

std::string TextStream::release(std::size_t n) {
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  released_bytes_ += n;
  return out;
}

}  // namespace peregrine

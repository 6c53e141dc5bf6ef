// Incremental detokenization for streaming responses: generated token ids in, text out as soon
// as it is safe to show. Text is held back while it ends in an incomplete UTF-8 sequence (a
// character split across byte-fallback / byte-level tokens) or in a suffix that could still
// grow into a stop string; a completed stop string cuts the text before it and ends the
// stream (OpenAI `stop` semantics: the stop sequence is not part of the output).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine {

class TextStream {
 public:
  /// `tokenizer` must outlive the stream; `prev_token` is the last prompt token (-1: none), so
  /// the first piece decodes in context (SentencePiece's leading space after BOS). Empty stop
  /// strings are ignored.
  TextStream(const Tokenizer& tokenizer, std::int32_t prev_token, std::vector<std::string> stop);

  /// Appends token `id`'s bytes and returns the newly releasable text (possibly ""). After a
  /// stop string completes, returns the text before it and stopped() turns true; later calls
  /// return "".
  std::string push(std::int32_t id);
  /// At the end of generation: the held-back remainder (a trailing incomplete UTF-8 sequence is
  /// returned as is; JSON output replaces it with U+FFFD). "" once stopped.
  std::string flush();

  /// Whether a stop string ended the text.
  bool stopped() const { return stopped_; }
  /// The stop string that ended it ("" when none did; the earliest in the text when several).
  const std::string& matched_stop() const { return matched_stop_; }
  /// Bytes released so far (the output text).
  std::size_t released_bytes() const { return released_bytes_; }

 private:
  /// Bytes at the end of pending_ that must wait: an incomplete UTF-8 character or the
  /// longest suffix that is a proper prefix of a stop string.
  std::size_t holdback() const;
  std::string release(std::size_t n);

  const Tokenizer& tokenizer_;
  std::int32_t prev_;
  std::vector<std::string> stop_;
  std::string pending_;  // decoded, not yet released
  std::size_t released_bytes_ = 0;
  bool stopped_ = false;
  std::string matched_stop_;
};

/// Bytes at the end of `text` that form an incomplete UTF-8 character (a lead byte followed
/// by fewer continuation bytes than it announces): 0..3 (RFC 3629).
std::size_t incomplete_utf8_suffix(std::string_view text);

/// The length of the longest suffix of `text` that is a proper prefix of `marker` (non-empty):
/// what a stream holds back while a stop string or a tag (<think>, <tool_call>) may be starting.
std::size_t partial_marker(std::string_view text, std::string_view marker);

}  // namespace peregrine

// The client side of Server-Sent Events (https://html.spec.whatwg.org/multipage/server-sent-events.html):
// a byte stream, split anywhere, in; the data payloads of complete events out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace peregrine {

class SseReader {
 public:
  /// Feeds the next bytes; returns the data of each event they complete (an event ends at a
  /// blank line; its "data:" lines are joined with "\n", one leading space dropped; comment
  /// lines and other fields are skipped; CRLF and LF line ends both work).
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string line_;   // the current, unfinished line
  std::string data_;   // data of the current event
  bool has_data_ = false;
};

}  // namespace peregrine

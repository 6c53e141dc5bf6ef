#include "peregrine/server/sse_reader.h"

namespace peregrine {

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (line_.starts_with("data:")) {
      std::string_view value = std::string_view(line_).substr(5);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
    line_.clear();
  }
  return events;
}

}  // namespace peregrine

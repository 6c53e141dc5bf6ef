#include "peregrine/core/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace peregrine {

Expected<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return not_found("cannot read file " + path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path);
  return ss.str();
}

}  // namespace peregrine

#include "test_paths.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace peregrine::test {

std::string shared_dir() { return PEREGRINE_SHARED_DIR; }
std::string source_dir() { return PEREGRINE_SOURCE_DIR; }
std::string testdata_dir() { return PEREGRINE_TESTDATA_DIR; }
std::string peregrine_binary() { return PEREGRINE_BINARY; }

std::string make_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "peregrine-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return {};
  return tmpl;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace peregrine::test

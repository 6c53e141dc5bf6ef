#include "test_paths.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace peregrine::test {

namespace {

// $name when set (a test binary run on another machine: the GPU checks), else the build's path.
std::string env_or(const char* name, const char* built) {
  const char* v = ::getenv(name);
  return v != nullptr && *v != '\0' ? v : built;
}

}  // namespace

std::string shared_dir() { return env_or("PEREGRINE_SHARED_DIR", PEREGRINE_SHARED_DIR); }
std::string source_dir() { return PEREGRINE_SOURCE_DIR; }
std::string testdata_dir() { return env_or("PEREGRINE_TESTDATA_DIR", PEREGRINE_TESTDATA_DIR); }
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

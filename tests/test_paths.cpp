#include "test_paths.h"

#include <algorithm>

#include <cstdlib>

#include <unistd.h>

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

std::string mpirun_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = dir + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<std::string> mpirun_command(int ranks) {
  return {mpirun_path(), "--oversubscribe", "-np", std::to_string(ranks), peregrine_binary()};
}

void set_mpirun_environment() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  // A rank waiting in a collective yields its core instead of spinning: the suite runs two tests
  // at a time on CI's 2 cores, and a spinning rank starved the other test's server.
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  const char* asan = std::getenv("ASAN_OPTIONS");
  ::setenv("ASAN_OPTIONS", (std::string(asan != nullptr ? asan : "") + ":detect_leaks=0").c_str(), 1);
}

std::vector<pid_t> child_pids(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state != "Z") out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace peregrine::test

#include "run_cli.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_paths.h"

namespace peregrine::test {

namespace {

// Starts `command` (program first; no shell) with stdout / stderr to files of a fresh temp folder (with
// mpirun's environment when `mpi`; stdin from `input_path` when given); returns its pid and the two paths.
struct Started {
  pid_t pid;
  std::string out_path, err_path;
};
Started start(const std::vector<std::string>& command, bool mpi, const std::string& input_path = "") {
  const std::string dir = make_temp_dir();
  Started s{-1, dir + "/out", dir + "/err"};
  s.pid = ::fork();
  if (s.pid == 0) {
    if (!input_path.empty()) ::dup2(::open(input_path.c_str(), O_RDONLY), 0);
    const int out = ::open(s.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(s.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (mpi) set_mpirun_environment();
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return s;
}

CliResult finish(const Started& s, int status) {
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(s.out_path);
  r.err = read_file(s.err_path);
  return r;
}

// `first` followed by `args`.
std::vector<std::string> joined(std::vector<std::string> first, const std::vector<std::string>& args) {
  first.insert(first.end(), args.begin(), args.end());
  return first;
}

}  // namespace

CliResult run_cli(const std::vector<std::string>& args) {
  const Started s = start(joined({peregrine_binary()}, args), false);
  int status = 0;
  ::waitpid(s.pid, &status, 0);
  return finish(s, status);
}

CliResult run_cli_with_input(const std::vector<std::string>& args, const std::string& input) {
  const std::string path = make_temp_dir() + "/stdin";
  write_file(path, input);
  const Started s = start(joined({peregrine_binary()}, args), false, path);
  int status = 0;
  ::waitpid(s.pid, &status, 0);
  return finish(s, status);
}

CliResult run_mpirun(int ranks, const std::vector<std::string>& args) {
  const Started s = start(joined(mpirun_command(ranks), args), true);
  int status = 0;
  ::waitpid(s.pid, &status, 0);
  return finish(s, status);
}

CliResult run_mpirun_killing_one_rank(int ranks, const std::vector<std::string>& args, double kill_after_s,
                                      double timeout_s, std::vector<pid_t>& rank_pids) {
  const Started s = start(joined(mpirun_command(ranks), args), true);
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  int status = 0;
  bool killed = false;
  while (true) {
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) break;
    if (!killed && elapsed() >= kill_after_s) {
      // On a loaded machine mpirun may not have started every rank yet: wait until it has.
      rank_pids = child_pids(s.pid);
      if (static_cast<int>(rank_pids.size()) == ranks) {
        ::kill(rank_pids.back(), SIGKILL);
        killed = true;
      }
    }
    if (elapsed() > timeout_s) {  // a hang: end the whole run, report it as a timeout
      ::kill(s.pid, SIGKILL);
      ::waitpid(s.pid, &status, 0);
      CliResult r = finish(s, status);
      r.exit_code = -2;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return finish(s, status);
}


void expect_clean_error(const CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal";
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("peregrine: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string line_starting_with(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

bool training_library_built() {
  return std::filesystem::exists(std::filesystem::path(peregrine_binary()).parent_path() / "libperegrine_train.so");
}

std::string training_text_path() { return shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt"; }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace peregrine::test

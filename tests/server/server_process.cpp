#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "test_paths.h"

namespace peregrine::test {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args) : ServerProcess(0, args) {}

ServerProcess::ServerProcess(int ranks, const std::vector<std::string>& args) {
  ::signal(SIGPIPE, SIG_IGN);  // a test client writing to a server that hung up gets EPIPE, not killed
  log_path_ = make_temp_dir() + "/serve.log";
  std::vector<std::string> argv_s = ranks > 0 ? mpirun_command(ranks) : std::vector<std::string>{peregrine_binary()};
  for (const char* a : {"serve", "--port", "0"}) argv_s.push_back(a);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    const int err = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err, 2);
    if (ranks > 0) set_mpirun_environment();
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  static const std::regex kListening(R"(peregrine: listening on http://127\.0\.0\.1:([0-9]+) )");
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::smatch m;
    const std::string text = log();
    if (std::regex_search(text, m, kListening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited before listening
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop(SIGKILL, 10);
}

std::string ServerProcess::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::string ServerProcess::log() const { return read_file(log_path_); }

int ServerProcess::stop(int signal, double timeout_s) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

}  // namespace peregrine::test

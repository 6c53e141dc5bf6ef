#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <sstream>
#include <regex>
#include <thread>

#include "test_paths.h"

namespace peregrine::test {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args) : ServerProcess(0, args) {}

ServerProcess::ServerProcess(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = ranks > 0 ? mpirun_command(ranks) : std::vector<std::string>{peregrine_binary()};
  for (const char* a : {"serve", "--port", "0"}) argv_s.push_back(a);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  start(std::move(argv_s), ranks > 0);
}

ServerProcess::ServerProcess(const std::vector<std::string>& decode_args, const std::vector<std::string>& prefill_args) {
  std::vector<std::string> argv_s = mpirun_command(1);
  for (const char* a : {"serve", "--port", "0", "--role", "decode"}) argv_s.push_back(a);
  argv_s.insert(argv_s.end(), decode_args.begin(), decode_args.end());
  for (const std::string& a : {std::string(":"), std::string("-np"), std::string("1"), peregrine_binary()}) argv_s.push_back(a);
  for (const char* a : {"serve", "--role", "prefill"}) argv_s.push_back(a);
  argv_s.insert(argv_s.end(), prefill_args.begin(), prefill_args.end());
  start(std::move(argv_s), true);
}

void ServerProcess::start(std::vector<std::string> argv_s, bool mpirun) {
  ::signal(SIGPIPE, SIG_IGN);  // a test client writing to a server that hung up gets EPIPE, not killed
  log_path_ = make_temp_dir() + "/serve.log";
  pid_ = ::fork();
  if (pid_ == 0) {
    const int err = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err, 2);
    if (mpirun) set_mpirun_environment();
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

double metric(const ServerProcess& server, const std::string& name) {
  httplib::Client client(server.url());
  auto r = client.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace peregrine::test

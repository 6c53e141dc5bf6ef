// A `peregrine serve` child process for integration tests (or mpirun running its ranks): started
// on a free port (--port 0), ready once it printed its "listening on http://HOST:PORT" line,
// killed when destroyed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace peregrine::test {

class ServerProcess {
 public:
  /// Runs `peregrine serve --port 0 <args>` (stories260K by default) and waits up to 60 s for
  /// the listening line; ready() says whether it came.
  explicit ServerProcess(const std::vector<std::string>& args);
  /// The same under `mpirun --oversubscribe -np ranks` (test_paths.h: mpirun_command), with
  /// mpirun's environment; pid() is mpirun's.
  ServerProcess(int ranks, const std::vector<std::string>& args);
  /// A disaggregated pair under mpirun (serve --role): `mpirun --oversubscribe -np 1 peregrine
  /// serve --port 0 --role decode <decode_args> : -np 1 peregrine serve --role prefill
  /// <prefill_args>`; pid() is mpirun's.
  ServerProcess(const std::vector<std::string>& decode_args, const std::vector<std::string>& prefill_args);
  ~ServerProcess();  // SIGKILL if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ready() const { return port_ > 0; }
  int port() const { return port_; }
  /// "http://127.0.0.1:PORT".
  std::string url() const;
  /// Everything the server wrote to stderr so far.
  std::string log() const;
  /// Sends `signal` (0: none, only waits) and waits up to `timeout_s` for the exit; returns the exit code, 128 +
  /// signal number when killed, or -1 on timeout.
  int stop(int signal, double timeout_s);
  /// The process started (mpirun under the ranks constructor), -1 once it exited.
  pid_t pid() const { return pid_; }

 private:
  // Starts argv (under mpirun's environment when `mpirun`) and waits for the listening line.
  void start(std::vector<std::string> argv_s, bool mpirun);
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

/// The value of the unlabelled sample `name` of `server`'s /metrics, -1 when absent.
double metric(const ServerProcess& server, const std::string& name);

}  // namespace peregrine::test

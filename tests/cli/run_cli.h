// Runs the built `peregrine` binary and captures its exit code, stdout and stderr.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "test_paths.h"  // read_file

namespace peregrine::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

/// Runs `peregrine args...` (no shell), waiting for it to finish.
CliResult run_cli(const std::vector<std::string>& args);

/// Runs `peregrine args...` with `input` as its stdin (a file: a pipe's end of input at its end).
CliResult run_cli_with_input(const std::vector<std::string>& args, const std::string& input);

/// Runs `mpirun --oversubscribe -np ranks peregrine args...` (as root too; under AddressSanitizer
/// without its leak check: Open MPI's allocations), waiting for it to finish.
CliResult run_mpirun(int ranks, const std::vector<std::string>& args);

/// As run_mpirun, but kill_after_s seconds in (or later, once mpirun has started all `ranks`)
/// sends SIGKILL to the last rank mpirun started (their pids, in start order, go to
/// rank_pids); if mpirun has not ended timeout_s seconds in,
/// kills it and returns exit_code -2 (a hang).
CliResult run_mpirun_killing_one_rank(int ranks, const std::vector<std::string>& args, double kill_after_s,
                                      double timeout_s, std::vector<pid_t>& rank_pids);

/// Expects a failed run with one clean error line: exit code in [1, 128) (no signal), nothing
/// on stdout, stderr exactly "peregrine: error: ...\n" containing `needle`.
void expect_clean_error(const CliResult& r, const std::string& needle);

/// The first line of `text` starting with `prefix` ("" if none), without its newline.
std::string line_starting_with(const std::string& text, const std::string& prefix);

/// Whether the binary has its training library beside it (built with libtorch).
bool training_library_built();

/// The training tests' text: tinystories_valid_excerpt.txt in the shared data.
std::string training_text_path();

/// Writes `bytes` to `path` (binary).
void write_file(const std::string& path, const std::string& bytes);

}  // namespace peregrine::test

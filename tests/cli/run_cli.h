// Runs the built `peregrine` binary and captures its exit code, stdout and stderr.
#pragma once

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

/// Writes `bytes` to `path` (binary).
void write_file(const std::string& path, const std::string& bytes);

}  // namespace peregrine::test

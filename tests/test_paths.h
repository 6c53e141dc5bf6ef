// Paths to real data used by the tests (the shared read-only folder, generated test models).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace peregrine::test {

/// ../shared (real models, tokenizers, texts); $PEREGRINE_SHARED_DIR overrides it.
std::string shared_dir();
/// The repository root.
std::string source_dir();
/// build/testdata (random-weight models + reference logits written by tools/);
/// $PEREGRINE_TESTDATA_DIR overrides it.
std::string testdata_dir();
/// The built CLI binary.
std::string peregrine_binary();
/// A fresh empty temporary directory, unique per call.
std::string make_temp_dir();

/// Reads a whole file (binary); "" if it cannot be read.
std::string read_file(const std::string& path);

/// The mpirun on PATH (Open MPI), or "" when there is none.
std::string mpirun_path();

/// mpirun's command line for `ranks` local ranks of the peregrine binary (--oversubscribe), to
/// which the peregrine arguments follow.
std::vector<std::string> mpirun_command(int ranks);

/// Sets, in the calling (child) process, what mpirun needs here: root may run it (CI runs as
/// root), ranks yield their core while they wait (mpi_yield_when_idle), and under
/// AddressSanitizer no leak check (Open MPI's own allocations at exit).
void set_mpirun_environment();

/// The live (not zombie) children of process `parent`, by pid.
std::vector<pid_t> child_pids(pid_t parent);

/// Whether process `pid` exists and is not a zombie (one that ended but was not reaped yet).
bool process_running(pid_t pid);

}  // namespace peregrine::test

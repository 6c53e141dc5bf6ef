// Shared libraries the engine loads on first use (the CUDA backend, the training library, the
// SentencePiece library): dlopen with RTLD_LOCAL, so that what they link (CUDA runtime,
// libtorch, libsentencepiece) stays out of every process that does not use them and out of the
// global symbol scope, where their copies of the same libraries would collide.
#pragma once

#include <string>

namespace peregrine {

struct RuntimeLibrary {
  const void* api = nullptr;  // what the entry point returned; null when the library did not load
  std::string why;            // when api is null: what is missing
};

/// Loads `file_name` from $`env_var` when set (that path only), else beside the running
/// executable, else in `build_dir` (the build tree's bin folder, may be empty), and returns what
/// its C-linkage entry point `entry` (a function taking nothing, returning a pointer) returns.
/// Not found: why = "this build has no <what> (<file_name> not found beside the executable):
/// <hint>"; a library that does not load or lacks `entry`: why says so with dlerror's text.
RuntimeLibrary load_runtime_library(const std::string& file_name, const char* env_var, const std::string& build_dir,
                                    const char* entry, const std::string& what, const std::string& hint);

}  // namespace peregrine

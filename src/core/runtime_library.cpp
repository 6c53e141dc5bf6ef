#include "peregrine/core/runtime_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace peregrine {
namespace {

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

RuntimeLibrary load_runtime_library(const std::string& file_name, const char* env_var, const std::string& build_dir,
                                    const char* entry, const std::string& what, const std::string& hint) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  } else {
    candidates.push_back(executable_dir() + "/" + file_name);
    if (!build_dir.empty()) candidates.push_back(build_dir + "/" + file_name);
  }
  RuntimeLibrary out;
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      out.why = "cannot load " + what + " " + path + ": " + ::dlerror();
      return out;
    }
    using Entry = const void* (*)();
    auto fn = reinterpret_cast<Entry>(::dlsym(handle, entry));
    if (fn == nullptr) {
      out.why = path + " has no " + entry;
      return out;
    }
    out.api = fn();
    return out;
  }
  out.why = "this build has no " + what + " (" + file_name + " not found beside the executable): " + hint;
  return out;
}

}  // namespace peregrine

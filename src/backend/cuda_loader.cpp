// Loads the CUDA backend library on first use (backend/cuda_forward.h): $PEREGRINE_CUDA_LIBRARY,
// else libperegrine_cuda.so beside the running executable, else in the build tree it was built
// in. Without it every entry point reports kUnavailable with the reason.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "backend/cuda_backend_api.h"

namespace peregrine {
namespace {

constexpr const char* kLibrary = "libperegrine_cuda.so";

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

struct Loaded {
  const CudaBackendApi* api = nullptr;
  std::string why;  // when api is null
};

Loaded load() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("PEREGRINE_CUDA_LIBRARY"); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  } else {
    candidates.push_back(executable_dir() + "/" + kLibrary);
#ifdef PEREGRINE_CUDA_LIBRARY_DIR
    candidates.push_back(std::string(PEREGRINE_CUDA_LIBRARY_DIR) + "/" + kLibrary);
#endif
  }
  Loaded out;
  for (const std::string& path : candidates) {
    if (!std::filesystem::exists(path)) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      out.why = std::string("cannot load the CUDA backend ") + path + ": " + ::dlerror();
      return out;
    }
    using Entry = const CudaBackendApi* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, PEREGRINE_CUDA_BACKEND_SYMBOL));
    if (entry == nullptr) {
      out.why = path + " has no " + PEREGRINE_CUDA_BACKEND_SYMBOL;
      return out;
    }
    out.api = entry();
    return out;
  }
  out.why = std::string("this build has no CUDA backend (") + kLibrary +
            " not found beside the executable; configure with -DPEREGRINE_CUDA=ON where nvcc is installed, or set "
            "PEREGRINE_CUDA_LIBRARY)";
  return out;
}

const Loaded& backend() {
  static const Loaded loaded = load();  // once per process (thread-safe static)
  return loaded;
}

}  // namespace

bool cuda_device_available(std::string* why) {
  const Loaded& b = backend();
  if (b.api != nullptr) return b.api->device_available(why);
  if (why != nullptr) *why = b.why;
  return false;
}

Expected<std::unique_ptr<CudaForward>> CudaForward::create(const ModelConfig& config, const CudaModelWeights& weights,
                                                           float attention_scale) {
  const Loaded& b = backend();
  if (b.api == nullptr) return unavailable(b.why);
  return b.api->create(config, weights, attention_scale);
}

Expected<double> cuda_copy_bandwidth_gbs(std::int64_t bytes, int repeats) {
  const Loaded& b = backend();
  if (b.api == nullptr) return unavailable(b.why);
  return b.api->copy_bandwidth_gbs(bytes, repeats);
}

}  // namespace peregrine

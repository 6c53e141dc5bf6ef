// Loads the CUDA backend library on first use (backend/cuda_forward.h): $PEREGRINE_CUDA_LIBRARY,
// else libperegrine_cuda.so beside the running executable, else in the build tree it was built
// in. Without it every entry point reports kUnavailable with the reason.
#include "backend/cuda_backend_api.h"
#include "peregrine/core/runtime_library.h"

namespace peregrine {
namespace {

struct Loaded {
  const CudaBackendApi* api = nullptr;
  std::string why;  // when api is null
};

Loaded load() {
#ifdef PEREGRINE_CUDA_LIBRARY_DIR
  const std::string build_dir = PEREGRINE_CUDA_LIBRARY_DIR;
#else
  const std::string build_dir;
#endif
  const RuntimeLibrary lib = load_runtime_library("libperegrine_cuda.so", "PEREGRINE_CUDA_LIBRARY", build_dir,
                                                  PEREGRINE_CUDA_BACKEND_SYMBOL, "CUDA backend",
                                                  "build it (cmake --build build, configured with -DPEREGRINE_CUDA=ON where nvcc is installed), or set PEREGRINE_CUDA_LIBRARY");
  return {static_cast<const CudaBackendApi*>(lib.api), lib.why};
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

Expected<std::int64_t> cuda_free_memory_bytes() {
  const Loaded& b = backend();
  if (b.api == nullptr) return unavailable(b.why);
  return b.api->free_memory_bytes();
}

}  // namespace peregrine

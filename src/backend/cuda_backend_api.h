// The C-linkage entry point of the CUDA backend library (libperegrine_cuda.so) and the table
// of functions it returns; backend/cuda_loader.cpp dlopens the library and calls through it.
// Both sides are built together from this header, so C++ types cross the boundary as is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "peregrine/backend/cuda_forward.h"

namespace peregrine {

struct CudaBackendApi {
  bool (*device_available)(std::string* why);
  Expected<std::unique_ptr<CudaForward>> (*create)(const ModelConfig& config, const CudaModelWeights& weights,
                                                   float attention_scale);
  Expected<double> (*copy_bandwidth_gbs)(std::int64_t bytes, int repeats);
  Expected<std::int64_t> (*free_memory_bytes)();
};

}  // namespace peregrine

/// Name of the entry point: const peregrine::CudaBackendApi* peregrine_cuda_backend().
#define PEREGRINE_CUDA_BACKEND_SYMBOL "peregrine_cuda_backend"

// Kernel launches with programmatic dependent launch (PDL, sm_90): each kernel of a forward may
// start while the previous one drains; it calls griddep_wait() before reading anything an
// earlier kernel wrote (and before it can exit), which waits for the previous grid to finish
// and its writes to be visible. Every kernel waits unconditionally, so the wait is transitive
// along the stream. A GEMV issues its first weight loads (which no kernel writes) before the
// wait, overlapping them with the previous kernel's tail. In a CUDA Graph capture the launches
// become programmatic-dependency edges.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_status.cuh"

namespace peregrine::cuda {

/// Waits for the grid this launch depends on (no-op without PDL or before sm_90).
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel in the stream be scheduled now (it still waits in griddep_wait).
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Launches kernel<<<grid, block, 0, stream>>>(args...) with PDL allowed; `name` labels errors.
template <typename... KernelArgs, typename... Args>
Status launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t stream, const char* name, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cuda_status(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

}  // namespace peregrine::cuda

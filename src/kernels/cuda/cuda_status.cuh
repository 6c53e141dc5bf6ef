// CUDA / cuBLAS return codes → Status (core/status.h): every runtime call and every kernel
// launch of the backend is checked (a kernel's launch error is read with cudaGetLastError).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "peregrine/core/status.h"

namespace peregrine::cuda {

/// ok, or kResourceExhausted for cudaErrorMemoryAllocation, else kUnavailable, each
/// "CUDA: <what>: <runtime message>".
inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  std::string msg = std::string("CUDA: ") + what + ": " + cudaGetErrorString(e);
  return e == cudaErrorMemoryAllocation ? resource_exhausted(std::move(msg)) : unavailable(std::move(msg));
}

/// ok, or kUnavailable "cuBLAS: <what>: status <code>".
inline Status cublas_status(cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return unavailable(std::string("cuBLAS: ") + what + ": status " + std::to_string(static_cast<int>(e)));
}

/// The error of the last kernel launch, if any.
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

}  // namespace peregrine::cuda

#define PEREGRINE_CUDA_RETURN(expr, what) PEREGRINE_RETURN_IF_ERROR(::peregrine::cuda::cuda_status((expr), (what)))

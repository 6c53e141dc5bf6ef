// Matrix products with many activation rows (prefill) on the GPU through cuBLAS (GemmEx,
// f32 accumulation, f32 output): y [n, rows] = x [n, cols] · Wᵀ. F32 weights multiply f32
// activations (CUBLAS_COMPUTE_32F, no TF32); F16 / BF16 weights multiply the activations
// rounded to the weight's type; Q8_0 / Q4_0 weights are first decoded to f16 (exactly: d · q
// with d an f16) into a scratch matrix.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_matrix.cuh"
#include "kernels/cuda/gemv.cuh"
#include "peregrine/core/status.h"

namespace peregrine::cuda {

/// Device scratch of gemm, grown on demand: the activations in f16/bf16 and a decoded weight.
struct GemmScratch {
  void* x = nullptr;
  std::size_t x_bytes = 0;
  void* w = nullptr;
  std::size_t w_bytes = 0;
  ~GemmScratch();
};

/// y = x · wᵀ as above (out.y [n, *] with row stride out.ldy; out.epilogue kStore or
/// kAccumulate, the latter as cuBLAS's beta = 1) on `stream`. Growing the scratch synchronizes
/// the device. Errors: kInvalidArgument (kSwiGlu), kResourceExhausted (device memory),
/// kUnavailable (CUDA / cuBLAS errors).
Status gemm(cublasHandle_t blas, const DeviceMatrix& w, const float* x, std::int64_t n, const GemvOutput& out,
            GemmScratch& scratch, cudaStream_t stream);

}  // namespace peregrine::cuda

#include "kernels/cuda/gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <typename T>
__global__ void round_kernel(const float* x, std::int64_t count, T* out) {
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= count) return;
  if constexpr (std::is_same_v<T, __half>) out[i] = __float2half_rn(x[i]);
  else out[i] = __float2bfloat16_rn(x[i]);
}

// One thread per weight value: W[r, j] = d[r, j/32] · code, written row-major [rows, cols].
template <bool kQ4>
__global__ void decode_kernel(const std::uint8_t* codes, const __half* scales, std::int64_t rows, std::int64_t cols,
                              __half* out) {
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * cols) return;
  const std::int64_t blk = i / 32;
  const int k = static_cast<int>(i % 32);
  int q;
  if constexpr (kQ4) {
    const std::uint8_t byte = codes[blk * 16 + (k % 16)];
    q = (k < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
  } else {
    q = static_cast<std::int8_t>(codes[blk * 32 + k]);
  }
  out[i] = __float2half_rn(__half2float(scales[blk]) * static_cast<float>(q));
}

Status grow(void*& p, std::size_t& have, std::size_t need) {
  if (have >= need) return Status::ok();
  if (p != nullptr) {
    PEREGRINE_CUDA_RETURN(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaFree(p);
    p = nullptr;
    have = 0;
  }
  PEREGRINE_CUDA_RETURN(cudaMalloc(&p, need), "cudaMalloc (GEMM scratch)");
  have = need;
  return Status::ok();
}

cudaDataType_t blas_type(MatrixFormat f) {
  switch (f) {
    case MatrixFormat::kF32: return CUDA_R_32F;
    case MatrixFormat::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_16F;  // f16, and the decoded Q8_0 / Q4_0
  }
}

}  // namespace

GemmScratch::~GemmScratch() {
  if (x != nullptr) cudaFree(x);
  if (w != nullptr) cudaFree(w);
}

Status gemm(cublasHandle_t blas, const DeviceMatrix& w, const float* x, std::int64_t n, const GemvOutput& out,
            GemmScratch& scratch, cudaStream_t stream) {
  if (out.epilogue == Epilogue::kSwiGlu) return invalid_argument("gemm: no SwiGLU epilogue");
  const std::int64_t cols = w.cols, rows = w.rows;
  const void* a = w.data;  // column-major [cols, rows] = Wᵀ stored row-major
  std::int64_t lda = w.stride;
  const void* b = x;
  if (w.quantized()) {
    PEREGRINE_RETURN_IF_ERROR(grow(scratch.w, scratch.w_bytes, static_cast<std::size_t>(rows * cols * 2)));
    auto* decoded = static_cast<__half*>(scratch.w);
    const auto* codes = static_cast<const std::uint8_t*>(w.data);
    const bool q4 = w.format == MatrixFormat::kQ4_0;
    PEREGRINE_RETURN_IF_ERROR(launch(q4 ? decode_kernel<true> : decode_kernel<false>, blocks_for(rows * cols), kThreads, stream,
                                     "decode weights", codes, w.scales, rows, cols, decoded));
    a = decoded;
    lda = cols;
  }
  if (w.format != MatrixFormat::kF32) {
    PEREGRINE_RETURN_IF_ERROR(grow(scratch.x, scratch.x_bytes, static_cast<std::size_t>(n * cols * 2)));
    if (w.format == MatrixFormat::kBF16) {
      PEREGRINE_RETURN_IF_ERROR(launch(round_kernel<__nv_bfloat16>, blocks_for(n * cols), kThreads, stream, "round activations", x,
                                       n * cols, static_cast<__nv_bfloat16*>(scratch.x)));
    } else {
      PEREGRINE_RETURN_IF_ERROR(launch(round_kernel<__half>, blocks_for(n * cols), kThreads, stream, "round activations", x,
                                       n * cols, static_cast<__half*>(scratch.x)));
    }
    b = scratch.x;
  }
  PEREGRINE_RETURN_IF_ERROR(cublas_status(cublasSetStream(blas, stream), "cublasSetStream"));
  const float one = 1.0f, beta = out.epilogue == Epilogue::kAccumulate ? 1.0f : 0.0f;
  const cudaDataType_t t = blas_type(w.format);
  return cublas_status(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                                    static_cast<int>(cols), &one, a, t, static_cast<int>(lda), b, t,
                                    static_cast<int>(cols), &beta, out.y, CUDA_R_32F, static_cast<int>(out.ldy),
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
}

}  // namespace peregrine::cuda

#include "kernels/cuda/elementwise.cuh"

#include "kernels/cuda/launch.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kThreads = 256;

// One thread block per output row: Σx² reduced over the block, then the scaled row (and its
// Q8_0 blocks, one warp per block of 32).
__global__ void rmsnorm_kernel(const float* x, const float* w, const std::int32_t* rows, std::int64_t dim, float eps,
                               float* out, Q8Activations q8) {
  __shared__ float partial[kThreads / 32];
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t i = blockIdx.x, r = rows != nullptr ? rows[i] : i;
  const float* xr = x + r * dim;
  float ss = 0.0f;
#pragma unroll 4
  for (std::int64_t j = threadIdx.x; j < dim; j += kThreads) ss = fmaf(xr[j], xr[j], ss);
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int k = 0; k < kThreads / 32; ++k) total += partial[k];
  const float scale = rsqrtf(total / static_cast<float>(dim) + eps);
  for (std::int64_t j = threadIdx.x; j < dim; j += kThreads) out[i * dim + j] = xr[j] * scale * w[j];
  if (q8.q == nullptr) return;
  const std::int64_t nb = dim / 32;
  for (std::int64_t b = threadIdx.x / 32; b < nb; b += kThreads / 32) {
    const std::int64_t j = b * 32 + threadIdx.x % 32;
    quantize_block_q8(xr[j] * scale * w[j], i * nb + b, q8);
  }
}

__global__ void swiglu_kernel(const float* gu, std::int64_t n, std::int64_t width, float* out) {
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (k >= n * width) return;
  const std::int64_t t = k / width, i = k % width;
  const float g = gu[t * 2 * width + i];
  out[k] = g / (1.0f + expf(-g)) * gu[t * 2 * width + width + i];
}

}  // namespace

Status rmsnorm(const float* x, const float* w, const std::int32_t* rows, std::int64_t n, std::int64_t dim, float eps,
               float* out, const Q8Activations& q8, cudaStream_t stream) {
  return launch(rmsnorm_kernel, static_cast<unsigned>(n), kThreads, stream, "rmsnorm", x, w, rows, dim, eps, out, q8);
}

Status swiglu(const float* gu, std::int64_t n, std::int64_t width, float* out, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>((n * width + kThreads - 1) / kThreads);
  return launch(swiglu_kernel, grid, kThreads, stream, "swiglu", gu, n, width, out);
}

}  // namespace peregrine::cuda

#include "kernels/cuda/q8_activations.cuh"

#include "kernels/cuda/launch.cuh"

namespace peregrine::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per block of 32 values; lane i quantizes value i.
__global__ void quantize_q8_kernel(const float* x, std::int64_t n_blocks, Q8Activations out) {
  griddep_launch_dependents();
  griddep_wait();
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (b < n_blocks) quantize_block_q8(x[b * 32 + threadIdx.x % 32], b, out);
}

}  // namespace

Status quantize_q8(const float* x, std::int64_t n, std::int64_t cols, const Q8Activations& out, cudaStream_t stream) {
  const std::int64_t n_blocks = n * cols / 32;
  const auto grid = static_cast<unsigned>((n_blocks + kWarpsPerBlock - 1) / kWarpsPerBlock);
  return launch(quantize_q8_kernel, grid, kWarpsPerBlock * 32, stream, "quantize_q8", x, n_blocks, out);
}

}  // namespace peregrine::cuda

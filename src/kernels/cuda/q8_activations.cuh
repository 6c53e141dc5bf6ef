// f32 activations → Q8_0 blocks of 32 on the GPU (ggml's quantize_row_q8_0 and the CPU engine's
// kernels/cpu/matmul/quantize_activations.h, with the same rounding: d = amax / 127, q = nearest-even
// (x · (1/d)), 0 where amax = 0), plus each block's integer sum of codes for Q4_0's −8 offset.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "peregrine/core/status.h"

namespace peregrine::cuda {

/// Device buffers of n rows × cols quantized values: q [n, cols] int8, d [n, cols/32] f32
/// block scales, sum [n, cols/32] int32 Σ q of each block.
struct Q8Activations {
  std::int8_t* q = nullptr;
  float* d = nullptr;
  std::int32_t* sum = nullptr;
};

/// Quantizes x [n, cols] f32 (cols a multiple of 32) into `out` on `stream`. Errors:
/// kUnavailable (launch failure).
Status quantize_q8(const float* x, std::int64_t n, std::int64_t cols, const Q8Activations& out, cudaStream_t stream);

/// One warp's block of 32: lane i holds value v; writes code i, and (lane 0) the block's scale
/// and code sum, at block index `b` of `out`.
__device__ __forceinline__ void quantize_block_q8(float v, std::int64_t b, const Q8Activations& out) {
  const int lane = threadIdx.x % 32;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
  const int q = __float2int_rn(v * inv);
  out.q[b * 32 + lane] = static_cast<std::int8_t>(q);
  int sum = q;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    out.d[b] = d;
    out.sum[b] = sum;
  }
}

}  // namespace peregrine::cuda

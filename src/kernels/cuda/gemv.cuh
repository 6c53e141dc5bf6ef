// Dequantizing GEMV / small-batch GEMM on the GPU: y[t, r] = Σ_j W[r, j] · x[t, j] for
// 1–kMaxGemvTokens activation rows, one thread block per output row (two weight rows for
// SwiGLU) with its threads across the columns, so that a row costs about one memory latency:
// the weights read once in 16-byte loads coalesced across the block, several per thread in
// flight, the first issued before the kernel waits for its input (launch.cuh). Float formats
// multiply f32 activations; Q8_0 / Q4_0 multiply their Q8_0-quantized activations
// (q8_activations.cuh) with __dp4a, summing each block's codes in int32 and scaling by
// d_w · d_x, as the CPU engine's Q8_0/Q4_0 kernels and ggml's vec_dot_q4_0_q8_0 do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_matrix.cuh"
#include "kernels/cuda/q8_activations.cuh"
#include "peregrine/core/status.h"

namespace peregrine::cuda {

inline constexpr int kMaxGemvTokens = 8;

/// What a product does with its result.
enum class Epilogue {
  kStore,       // y[t, r] = acc
  kAccumulate,  // y[t, r] += acc (the residual add)
  kSwiGlu,      // w is [gate; up] (2h rows): y[t, r] = silu(gate_r · x_t) · (up_r · x_t), r < h
};

/// Where a product writes: y [n, *] with `ldy` values between rows, columns from 0.
struct GemvOutput {
  float* y = nullptr;
  std::int64_t ldy = 0;
  Epilogue epilogue = Epilogue::kStore;
};

/// The product above for n in [1, kMaxGemvTokens] activation rows x [n, w.cols] f32 (read for
/// float formats) or xq (its quantize_q8 blocks, read for Q8_0 / Q4_0).
/// Errors: kInvalidArgument (n out of range, kSwiGlu with an odd row count), kUnavailable
/// (launch failure).
Status gemv(const DeviceMatrix& w, const float* x, const Q8Activations& xq, int n, const GemvOutput& out,
            cudaStream_t stream);

}  // namespace peregrine::cuda

// Row-wise and element-wise ops of the decoder on the GPU, f32 throughout; each is the device
// twin of kernels/cpu/elementwise/elementwise.h's op of the same name (tests compare them through the
// model's logits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/q8_activations.cuh"
#include "peregrine/core/status.h"

namespace peregrine::cuda {

/// RMSNorm (Zhang & Sennrich 2019): out[i, :] = x[r_i, :] / sqrt(mean(x[r_i, :]²) + eps) · w for
/// i in [0, n), r_i = rows[i] (rows on the device) or i when rows is null; x [*, dim], w [dim],
/// out [n, dim]. When q8.q is set the normalized rows are also quantized into q8
/// (quantize_q8's blocks; dim a multiple of 32), for the Q8_0 / Q4_0 GEMV that reads them.
/// Errors: kUnavailable (launch failure).
Status rmsnorm(const float* x, const float* w, const std::int32_t* rows, std::int64_t n, std::int64_t dim, float eps,
               float* out, const Q8Activations& q8, cudaStream_t stream);

/// SwiGLU (Shazeer 2020) of products laid out [n, gate | up] (`width` values each, row stride
/// 2·width): out[t, i] = g / (1 + e^-g) · u, g = gu[t, i], u = gu[t, width + i]; out [n, width].
Status swiglu(const float* gu, std::int64_t n, std::int64_t width, float* out, cudaStream_t stream);

}  // namespace peregrine::cuda

// y = x · Wᵀ for a weight matrix in any stored dtype (the Linear layer of every projection).
#pragma once

#include <cstdint>
#include <span>

#include "peregrine/core/tensor.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

/// w: [out, in] row-major in dtype F32/F16/BF16/Q8_0/Q4_0 (GGUF block layout, rows whole
/// blocks). x: [n_tokens, in] f32. y: [n_tokens, out] f32 (overwritten).
/// Threaded over output rows; each weight row is decoded once and reused for every token
/// (prefill reads the weights once, decode is the n_tokens == 1 GEMV). Accumulates in f32.
/// Preconditions (checked by the model at load time): x.size() == n_tokens*in,
/// y.size() == n_tokens*out.
void matmul(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
            std::span<float> y, ThreadPool& pool);

/// Scalar single-threaded reference twin of matmul: dequantizes the whole matrix, then a
/// naive triple loop with f64 accumulation. Tests compare matmul against it.
void matmul_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                      std::span<float> y);

}  // namespace peregrine

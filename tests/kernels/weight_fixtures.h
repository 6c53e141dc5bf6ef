// Random weight matrices (F16 / BF16, the run-time quantized formats kInt and FP8, GGUF blocks) for the matmul tests,
// stored so that reading past the tensor faults, and the f32 summation error bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>

#include <vector>

#include "peregrine/core/tensor.h"
#include "peregrine/kernels/cpu/matmul/quantize_activations.h"

namespace peregrine::test {

/// n bytes that end exactly where an inaccessible page begins (and so start at whatever byte
/// alignment n leaves): a kernel that reads past the end of a tensor stored there crashes.
class GuardedBytes {
 public:
  explicit GuardedBytes(std::size_t n);
  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::shared_ptr<void> mapping_;
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A weight tensor and the bytes it views.
struct StoredWeights {
  GuardedBytes bytes;
  TensorView view;
};

/// [out, in] kInt weights with parameters p: every byte of the code stream random (so every
/// code, and random padding bits past the last value), f16 scales of random magnitude
/// 2^-12 .. 2^3, random zero points when asymmetric.
StoredWeights random_int_weights(std::int64_t out, std::int64_t in, const QuantParams& p, std::mt19937& rng);

/// [out, in] F8_E4M3 / F8_E5M2 weights: f32 row scales of random sign and magnitude, random
/// finite codes (no NaN or infinity).
StoredWeights random_fp8_weights(DType t, std::int64_t out, std::int64_t in, std::mt19937& rng);

/// [out, in] F16 / BF16 weights: standard normal values rounded to the type (nearest even).
StoredWeights random_half_weights(DType t, std::int64_t out, std::int64_t in, std::mt19937& rng);

/// A Q8_0 / Q4_0 weight matrix and the bytes it views.
struct BlockWeights {
  std::vector<std::uint8_t> storage;
  TensorView view;
};

/// [out, in] Q8_0 or Q4_0 weights of random GGUF blocks (every int8 / nibble value possible, f16
/// scales over several octaves, either sign) stored `offset` bytes past an aligned address.
BlockWeights random_block_weights(DType t, std::int64_t out, std::int64_t in, std::size_t offset, std::mt19937& rng);

/// [n_tokens, in] standard normal activations.
std::vector<float> random_activations(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng);

/// M = Σ_b |d_w d_x| Σ_j |q_w q_x| of row `row` of Q8_0 / Q4_0 `w` and token `token` of `xq`:
/// the sum of the magnitudes of every term the integer-dot kernels add.
double term_magnitude(const TensorView& w, const QuantizedActivations& xq, std::int64_t row, std::int64_t token);

/// γ_k = k·u / (1 − k·u), u = 2^-24: a floating-point sum in f32 whose terms each pass through at
/// most k roundings is within γ_k · Σ|terms| of the exact sum (Higham, "Accuracy and Stability of
/// Numerical Algorithms", §3.1).
double f32_gamma(double k);

}  // namespace peregrine::test

// AWQ (Lin et al., MLSys 2024, "AWQ: Activation-aware Weight Quantization for LLM Compression and
// Acceleration"): protects the weights of salient input channels (large mean |x|) by scaling
// them up before quantization and the activations down by the same factor (folded into the
// previous operation), with the scale exponent grid-searched per layer on calibration data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"

namespace peregrine {

struct AwqOptions {
  QuantParams params;     // bits, group_size, asymmetric of the target format
  int grid = 20;          // α ∈ {0, 1/grid, …, (grid-1)/grid}
};

/// The weight matrices that read one input (e.g. attn_q, attn_k, attn_v), each [rows_i, cols].
struct AwqWeights {
  std::vector<std::span<const float>> w;
  std::vector<std::int64_t> rows;
};

struct AwqScales {
  std::vector<float> scales;  // [cols]: s = max(mean|x|^α, 1e-4) / sqrt(max(s) · min(s)), s > 0
  float alpha = 0.0f;         // the best grid point
  double loss_rtn = 0.0;      // Σ_i ||x W_iᵀ - x Q(W_i)ᵀ||² / n (α = 0 is plain RTN)
  double loss_awq = 0.0;      // Σ_i ||x W_iᵀ - (x/s) Q(W_i·diag(s))ᵀ||² / n at the best α
};

/// Searches per-input-channel scales for `ws` given a sample x [n, cols] f32 of their input and
/// its per-channel mean |x| (x_abs_mean [cols], over all calibration rows): for each α of the
/// grid, s = x_abs_mean^α normalized, W_i ← RTN(W_i · diag(s)) · diag(s)⁻¹, loss = output MSE on
/// the sample; returns the α with the smallest loss (α = 0, s = 1, when nothing beats RTN).
/// The 1e-4 floor on mean|x|^α and the normalization follow llm-awq / AutoAWQ's auto_scale.
/// Errors: kInvalidArgument (empty ws, size mismatches, n < 1, !params.valid(), grid < 1,
/// non-finite weights or x, negative or non-finite x_abs_mean).
Expected<AwqScales> awq_search_scales(const AwqWeights& ws, std::int64_t cols, std::span<const float> x,
                                      std::int64_t n, std::span<const float> x_abs_mean, const AwqOptions& o);

}  // namespace peregrine

// SmoothQuant (Xiao et al., ICML 2023, "SmoothQuant: Accurate and Efficient Post-Training
// Quantization for Large Language Models"): migrates activation outliers into the weights with a
// per-input-channel scale, so that both can be quantized to int8 (W8A8).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

/// s_j = max|X_j|^α / max|W_j|^(1−α) for each input channel j (Eq. 4), where max|W_j| is taken
/// over every row of every matrix in `ws` (all read the same input; each [rows_i, cols] f32) and
/// act_abs_max [cols] is max |x_j| over the calibration tokens. Channels with a zero statistic get
/// s_j = 1; s is clamped to [1e-5, 1e5]. X·diag(s)⁻¹ · (diag(s)·W) = X·W.
/// Errors: kInvalidArgument (α outside [0, 1], size mismatches, empty ws, non-finite weights,
/// negative or non-finite act_abs_max).
Expected<std::vector<float>> smoothquant_scales(std::span<const float> act_abs_max,
                                                std::span<const std::span<const float>> ws,
                                                std::span<const std::int64_t> rows, std::int64_t cols,
                                                float alpha);

}  // namespace peregrine

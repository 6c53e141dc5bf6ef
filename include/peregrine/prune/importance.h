// Importance scores of a Linear weight's entries, the quantity unstructured and N:M pruning
// keep the highest of (prune/sparsity.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace peregrine {

/// |W| [rows, cols] (magnitude pruning). w [rows, cols] f32 row-major.
std::vector<float> magnitude_scores(std::span<const float> w);

/// Wanda's |W_ij| · ‖X_j‖₂ [rows, cols] (Sun et al., ICLR 2024, eq. 1): w [rows, cols] f32
/// row-major, input_norm [cols] the calibration inputs' per-feature l2 norms
/// (quant/calibration.h InputStats::l2_norm). Precondition: w.size() == rows · input_norm.size().
std::vector<float> wanda_scores(std::span<const float> w, std::span<const float> input_norm);

}  // namespace peregrine

// The scale searches behind ggml's block encoders (ggml-quants.c, llama.cpp c392e50): for a
// small group of values, the scale (and for the asymmetric formats the offset) and the integer
// codes that approximately minimise a weighted squared (or absolute) error. They reproduce ggml's
// f32 arithmetic operation for operation, so they must be compiled without FMA contraction
// (-ffp-contract=off, as ggml-base is built for the baseline x86-64 target).
#pragma once

#include <cstdint>
#include <span>

namespace peregrine::ggml {

/// Groups whose largest |x| is below this are treated as all zero (GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

/// Round to nearest, ties to even, for |v| <= 4194303 (ggml's nearest_int: v + 1.5·2^23 read
/// back as an integer). Outside that range the result is unspecified, as in ggml.
int nearest_int(float v);

/// Symmetric scale search (make_qx_quants with rmse_type 1): codes l in [-nmax, nmax - 1]
/// stored as L = l + nmax, scale s with x ≈ s·l. Starts from s = max / -nmax (max = the value
/// of largest magnitude), then tries the 18 inverse scales -(nmax + 0.1·k)/max, k = ±1..±9,
/// keeping the least-squares scale of the codes with the largest Σwxl² / Σwl², weights w =
/// `weights` (x² when empty). An all-zero group (max |x| < kGroupMaxEps) gives s = 0, L = 0.
/// Shapes: x and L have n values; weights empty or n values.
float search_symmetric_scale(std::span<const float> x, int nmax, std::span<const float> weights, std::int8_t* L);

/// Q3_K's scale search (make_q3_quants with do_rmse): codes as above from s = max / -nmax,
/// then up to 5 passes of moving single codes to the value that improves Σwxl² / Σwl²
/// (w = x²); returns the final least-squares scale. All-zero group: 0 and L = 0.
float search_q3_scale(std::span<const float> x, int nmax, std::int8_t* L);

/// Asymmetric scale + offset search (make_qkx2_quants): codes L in [0, nmax] with
/// x ≈ scale·L − the_min, the offset the_min >= 0 (the group minimum, clamped to <= 0, negated).
/// Tries the nstep + 1 inverse scales (rmin + rdelta·k + nmax) / (max − min) with the weighted
/// least-squares scale and offset of each code set, keeping the lowest Σ w·err (|err| with
/// use_mad, else err²). A constant group with max == min gives scale 0, L = 0.
/// Shapes: x, weights, L and the scratch Laux have n values.
float search_scale_and_min(std::span<const float> x, int nmax, std::span<const float> weights, std::uint8_t* L,
                           float& the_min, std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

/// Index of the entry of the sorted 16-entry grid `values` nearest to v (best_index_int8: ties
/// go to the upper entry; below / above the ends clamps).
int nearest_grid_index(const std::int8_t* values, float v);

}  // namespace peregrine::ggml

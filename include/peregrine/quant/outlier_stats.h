// Activation outlier statistics of a linear layer's input: the measurement that motivates
// LLM.int8() (Dettmers et al. 2022, §3.2: a few feature dimensions of magnitude >= 6 that
// per-token int8 quantization cannot hold beside the rest) and SmoothQuant (Xiao et al. 2023, §3:
// channel maxima far above the median channel's, which it migrates into the weights).
#pragma once

#include <cstdint>

#include "peregrine/quant/calibration.h"

namespace peregrine {

/// Outliers of one linear input over its calibration rows.
struct OutlierStats {
  std::int64_t width = 0;
  std::int64_t n_rows = 0;               // rows the maxima saw
  std::int64_t sample_rows = 0;          // rows of InputStats::sample the errors and shares come from
  float abs_max = 0.0f;                  // max over rows and channels of |x|
  float median_channel_max = 0.0f;       // median over channels j of max_t |x_tj| (the upper one of an even count)
  std::int64_t outlier_channels = 0;     // channels with max_t |x_tj| >= threshold
  double outlier_row_share = 0.0;        // share of sample rows with some |x_tj| >= threshold
  double int8_error = 0.0;               // sqrt(Σ‖x − Q(x)‖² / Σ‖x‖²) over the sample rows, Q: per-row
                                         // absmax symmetric int8 (W8A8's dynamic per-token activations)
  double int8_error_decomposed = 0.0;    // the same with the outlier channels kept exact and the
                                         // scale taken over the rest (LLM.int8()'s decomposition)

  /// abs_max / median_channel_max (0 when the median is 0).
  double max_to_median() const { return median_channel_max > 0.0f ? abs_max / median_channel_max : 0.0; }
};

/// The outlier statistics of `s` (calibrate()'s InputStats: abs_max over all its rows, the
/// errors and row shares over its sample) at `threshold` (LLM.int8()'s 6.0). A width-0 input
/// gives all zeros.
OutlierStats outlier_stats(const InputStats& s, float threshold);

}  // namespace peregrine

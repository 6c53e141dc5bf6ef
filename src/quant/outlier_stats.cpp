#include "peregrine/quant/outlier_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace peregrine {
namespace {

// Σ (x − Q(x))² over one row, Q = round(x / scale) · scale with scale = max |x_j| / 127 over the
// channels quantized (`exact[j]`: kept as they are).
double row_int8_sq_error(const float* x, std::int64_t width, const std::vector<char>& exact) {
  float amax = 0.0f;
  for (std::int64_t j = 0; j < width; ++j) {
    if (!exact[static_cast<std::size_t>(j)]) amax = std::max(amax, std::fabs(x[j]));
  }
  if (amax == 0.0f) return 0.0;
  const double scale = amax / 127.0;
  double err = 0.0;
  for (std::int64_t j = 0; j < width; ++j) {
    if (exact[static_cast<std::size_t>(j)]) continue;
    const double q = std::clamp(std::nearbyint(x[j] / scale), -127.0, 127.0) * scale;
    err += (x[j] - q) * (x[j] - q);
  }
  return err;
}

}  // namespace

OutlierStats outlier_stats(const InputStats& s, float threshold) {
  OutlierStats o;
  o.width = s.width;
  o.n_rows = s.n_rows;
  o.sample_rows = s.sample_rows();
  if (s.width == 0 || s.abs_max.empty()) return o;
  o.abs_max = *std::max_element(s.abs_max.begin(), s.abs_max.end());
  std::vector<float> maxima = s.abs_max;
  const auto mid = maxima.begin() + static_cast<std::ptrdiff_t>(maxima.size() / 2);
  std::nth_element(maxima.begin(), mid, maxima.end());
  o.median_channel_max = *mid;
  std::vector<char> outlier(s.abs_max.size()), none(s.abs_max.size(), 0);
  for (std::size_t j = 0; j < s.abs_max.size(); ++j) {
    outlier[j] = s.abs_max[j] >= threshold;
    o.outlier_channels += outlier[j];
  }
  double energy = 0.0, err = 0.0, err_decomposed = 0.0;
  std::int64_t rows_with_outliers = 0;
  for (std::int64_t t = 0; t < o.sample_rows; ++t) {
    const float* x = s.sample.data() + t * s.width;
    bool any = false;
    for (std::int64_t j = 0; j < s.width; ++j) {
      energy += static_cast<double>(x[j]) * x[j];
      any = any || std::fabs(x[j]) >= threshold;
    }
    rows_with_outliers += any;
    err += row_int8_sq_error(x, s.width, none);
    err_decomposed += row_int8_sq_error(x, s.width, outlier);
  }
  if (o.sample_rows > 0) o.outlier_row_share = static_cast<double>(rows_with_outliers) / static_cast<double>(o.sample_rows);
  if (energy > 0.0) {
    o.int8_error = std::sqrt(err / energy);
    o.int8_error_decomposed = std::sqrt(err_decomposed / energy);
  }
  return o;
}

}  // namespace peregrine

#include "peregrine/spec/forward_cost_model.h"

#include <algorithm>

namespace peregrine {

void ForwardCostModel::observe(std::int64_t rows, double seconds) {
  const auto x = static_cast<double>(rows);
  w_ = kDecay * w_ + 1;
  sx_ = kDecay * sx_ + x;
  sy_ = kDecay * sy_ + seconds;
  sxx_ = kDecay * sxx_ + x * x;
  sxy_ = kDecay * sxy_ + x * seconds;
}

double ForwardCostModel::seconds_per_row() const {
  const double var = w_ * sxx_ - sx_ * sx_;  // w² · variance of x
  if (w_ == 0 || var <= 1e-9 * w_ * w_) return 0.0;
  return std::max(0.0, (w_ * sxy_ - sx_ * sy_) / var);
}

double ForwardCostModel::seconds(std::int64_t rows) const {
  if (w_ == 0) return 0.0;
  const double b = seconds_per_row();
  const double a = (sy_ - b * sx_) / w_;
  return std::max(0.0, a + b * static_cast<double>(rows));
}

}  // namespace peregrine

// A running linear model of the target forward's cost in its batch rows, t(rows) ≈ a + b·rows,
// fitted by exponentially decayed least squares over the steps the engine ran. Speculation
// needs b: on a GPU verifying k more tokens is nearly free (b ≈ 0, seed 000's 14.0 vs 14.1 ms),
// on a CPU each row costs compute, which Leviathan et al.'s speedup formula (which assumes
// free verification) must be told about.
#pragma once

#include <cstdint>

namespace peregrine {

class ForwardCostModel {
 public:
  static constexpr double kDecay = 0.98;  // weight of the past per observation (~50 steps)
  /// One forward of `rows` batch rows took `seconds`.
  void observe(std::int64_t rows, double seconds);
  /// Fitted seconds of a forward of `rows` rows (0 before any observation); with fewer than
  /// two distinct row counts seen, the mean time (b = 0).
  double seconds(std::int64_t rows) const;
  /// Fitted b: seconds per extra row (>= 0).
  double seconds_per_row() const;

 private:
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed sums of 1, x, y, x², xy
};

}  // namespace peregrine

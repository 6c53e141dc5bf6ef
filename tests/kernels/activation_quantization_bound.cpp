#include "activation_quantization_bound.h"

#include <algorithm>
#include <cmath>

namespace peregrine::test {

double activation_quantization_bound(std::span<const float> w, std::span<const float> x, std::size_t block) {
  double bound = 0.0;
  for (std::size_t b = 0; b < x.size(); b += block) {
    double amax = 0.0, wsum = 0.0;
    for (std::size_t i = b; i < b + block; ++i) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      wsum += std::fabs(static_cast<double>(w[i]));
    }
    bound += amax / 254.0 * wsum;
  }
  return (1.0 + 1e-4) * bound;
}

}  // namespace peregrine::test

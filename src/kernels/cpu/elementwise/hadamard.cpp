#include "peregrine/kernels/cpu/elementwise/hadamard.h"

#include <bit>
#include <cmath>
#include <vector>

namespace peregrine {
namespace {

// Calls f(offset, size) for the power-of-two blocks of a row of n values, largest first.
template <typename F>
void for_each_block(std::int64_t n, F&& f) {
  std::int64_t offset = 0;
  for (int bit = 62; bit >= 0; --bit) {
    const std::int64_t m = std::int64_t{1} << bit;
    if ((n & m) == 0) continue;
    f(offset, m);
    offset += m;
  }
}

void fwht_block(float* x, std::int64_t m) {
  for (std::int64_t h = 1; h < m; h *= 2) {
    for (std::int64_t i = 0; i < m; i += 2 * h) {
      for (std::int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(m));
  for (std::int64_t i = 0; i < m; ++i) x[i] *= norm;
}

}  // namespace

void hadamard_transform(float* x, std::int64_t n_rows, std::int64_t n) {
  for (std::int64_t r = 0; r < n_rows; ++r) {
    for_each_block(n, [&](std::int64_t offset, std::int64_t m) { fwht_block(x + r * n + offset, m); });
  }
}

void hadamard_transform_reference(float* x, std::int64_t n_rows, std::int64_t n) {
  std::vector<double> y;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    for_each_block(n, [&](std::int64_t offset, std::int64_t m) {
      float* v = x + r * n + offset;
      y.assign(static_cast<std::size_t>(m), 0.0);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < m; ++j) {
          const double sign = (std::popcount(static_cast<std::uint64_t>(i & j)) % 2) ? -1.0 : 1.0;
          y[static_cast<std::size_t>(i)] += sign * v[j];
        }
      }
      const double norm = 1.0 / std::sqrt(static_cast<double>(m));
      for (std::int64_t i = 0; i < m; ++i) v[i] = static_cast<float>(y[static_cast<std::size_t>(i)] * norm);
    });
  }
}

}  // namespace peregrine

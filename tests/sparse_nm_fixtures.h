// Test fixtures for N:M sparse weights (quant/sparse_nm.h): magnitude pruning of an f32 matrix
// to the N:M pattern (Mishra et al. 2021: keep the n largest |w| of every m consecutive values).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <span>

namespace peregrine {

/// Zeros all but the n largest-magnitude values (first on ties) of every m consecutive values
/// of each row of `w` ([rows, cols] row-major with cols % m == 0, so groups never straddle rows;
/// m <= 8).
inline void prune_nm_by_magnitude(std::span<float> w, int n, int m) {
  for (std::size_t g = 0; g + static_cast<std::size_t>(m) <= w.size(); g += static_cast<std::size_t>(m)) {
    std::array<int, 8> order{};
    std::iota(order.begin(), order.begin() + m, 0);
    std::stable_sort(order.begin(), order.begin() + m,
                     [&](int a, int b) { return std::fabs(w[g + static_cast<std::size_t>(a)]) > std::fabs(w[g + static_cast<std::size_t>(b)]); });
    for (int j = n; j < m; ++j) w[g + static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] = 0.0f;
  }
}

}  // namespace peregrine

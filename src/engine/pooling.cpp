#include "peregrine/engine/pooling.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace peregrine {

Expected<Pooling> parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "last") return Pooling::kLast;
  if (name == "cls") return Pooling::kCls;
  return invalid_argument("unknown pooling '" + std::string(name) + "' (expected mean, last or cls)");
}

void pool_rows(Pooling pooling, std::int64_t first_pos, std::span<const float> rows, std::int64_t dim,
               std::vector<float>& acc) {
  const auto d = static_cast<std::size_t>(dim);
  const std::size_t n = rows.size() / d;
  if (n == 0) return;
  acc.resize(d, 0.0f);
  switch (pooling) {
    case Pooling::kMean:
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < d; ++i) acc[i] += rows[r * d + i];
      }
      break;
    case Pooling::kLast:
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>((n - 1) * d), d, acc.begin());
      break;
    case Pooling::kCls:
      if (first_pos == 0) std::copy_n(rows.begin(), d, acc.begin());
      break;
    case Pooling::kNone:
      break;
  }
}

std::vector<float> pooled_embedding(Pooling pooling, std::vector<float> acc, std::int64_t n_positions) {
  if (pooling == Pooling::kMean && n_positions > 0) {
    for (float& v : acc) v /= static_cast<float>(n_positions);
  }
  double norm = 0.0;
  for (float v : acc) norm += static_cast<double>(v) * v;
  if (norm > 0.0) {
    const auto scale = static_cast<float>(1.0 / std::sqrt(norm));
    for (float& v : acc) v *= scale;
  }
  return acc;
}

}  // namespace peregrine

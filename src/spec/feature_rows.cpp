#include "peregrine/spec/feature_rows.h"

#include <algorithm>

namespace peregrine {

void FeatureRows::put(std::int64_t first, std::span<const float> rows, std::int64_t dim) {
  if (rows.empty()) return;
  if (values.empty() || first < begin || first > begin + size(dim)) {
    values.clear();
    begin = first;
  } else {
    values.resize(static_cast<std::size_t>((first - begin) * dim));
  }
  values.insert(values.end(), rows.begin(), rows.end());
}

std::span<const float> FeatureRows::row(std::int64_t p, std::int64_t dim) const {
  if (p < begin || p >= begin + size(dim)) return {};
  return std::span(values).subspan(static_cast<std::size_t>((p - begin) * dim), static_cast<std::size_t>(dim));
}

void FeatureRows::drop_before(std::int64_t p, std::int64_t dim) {
  const std::int64_t n = std::clamp<std::int64_t>(p - begin, 0, size(dim));
  values.erase(values.begin(), values.begin() + n * dim);
  begin += n;
}

}  // namespace peregrine

#include "peregrine/prune/importance.h"

#include <cmath>

namespace peregrine {

std::vector<float> magnitude_scores(std::span<const float> w) {
  std::vector<float> s(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) s[i] = std::fabs(w[i]);
  return s;
}

std::vector<float> wanda_scores(std::span<const float> w, std::span<const float> input_norm) {
  std::vector<float> s(w.size());
  const std::size_t cols = input_norm.size();
  for (std::size_t i = 0; i < w.size(); ++i) s[i] = std::fabs(w[i]) * input_norm[i % cols];
  return s;
}

}  // namespace peregrine

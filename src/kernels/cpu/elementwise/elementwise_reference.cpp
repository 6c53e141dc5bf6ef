// Scalar reference twins of the elementwise kernels (elementwise.h), straight from the formulas.
#include <cmath>

#include "peregrine/kernels/cpu/elementwise/elementwise.h"

namespace peregrine {

void rmsnorm_reference(const float* x, const float* w, float* out, std::int64_t n, float eps) {
  double ss = 0.0;
  for (std::int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rope_reference(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int32_t pos,
                    float theta, RopeStyle style) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double angle = static_cast<double>(pos) * freq;
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    const std::int64_t ia = style == RopeStyle::kInterleaved ? 2 * i : i;
    const std::int64_t ib = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    for (std::int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const float a = v[ia], b = v[ib];
      v[ia] = a * c - b * s;
      v[ib] = a * s + b * c;
    }
  }
}

void swiglu_reference(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu_reference(float* gate, const float* up, std::int64_t n) {
  const double sqrt_2_over_pi = std::sqrt(2.0 / std::acos(-1.0));
  for (std::int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double u = sqrt_2_over_pi * (g + 0.044715 * g * g * g);
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-2.0 * u)) * up[i]);  // 0.5·g·(1 + tanh(u))
  }
}

}  // namespace peregrine

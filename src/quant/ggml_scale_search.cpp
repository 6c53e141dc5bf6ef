#include "quant/ggml_scale_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace peregrine::ggml {
namespace {

// The value of largest magnitude (signed; the first one on ties) and that magnitude.
struct SignedMax {
  float value = 0.0f, magnitude = 0.0f;
};

SignedMax signed_max(std::span<const float> x) {
  SignedMax m;
  for (float v : x) {
    if (std::fabs(v) > m.magnitude) m = {v, std::fabs(v)};
  }
  return m;
}

int clamp_code(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

// Σ w·x·l and Σ w·l² of the codes round(iscale·x) clamped to [-nmax, nmax - 1].
struct CodeSums {
  float wxl = 0.0f, wll = 0.0f;
};

float weight_of(std::span<const float> x, std::span<const float> weights, std::size_t i) {
  return weights.empty() ? x[i] * x[i] : weights[i];
}

CodeSums symmetric_sums(std::span<const float> x, int nmax, std::span<const float> weights, float iscale) {
  CodeSums s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int l = clamp_code(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = weight_of(x, weights, i);
    s.wxl += w * x[i] * static_cast<float>(l);
    s.wll += w * static_cast<float>(l) * static_cast<float>(l);
  }
  return s;
}

void store_symmetric_codes(std::span<const float> x, int nmax, float iscale, std::int8_t* L) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    L[i] = static_cast<std::int8_t>(nmax + clamp_code(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  }
}

}  // namespace

int nearest_int(float v) {
  const float shifted = v + 12582912.0f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
  std::int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

float search_symmetric_scale(std::span<const float> x, int nmax, std::span<const float> weights, std::int8_t* L) {
  const SignedMax m = signed_max(x);
  if (m.magnitude < kGroupMaxEps) {
    std::fill(L, L + x.size(), std::int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / m.value;
  store_symmetric_codes(x, nmax, iscale, L);
  CodeSums s = symmetric_sums(x, nmax, weights, iscale);
  float scale = s.wll != 0.0f ? s.wxl / s.wll : 0.0f;
  float best = scale * s.wxl;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / m.value;
    s = symmetric_sums(x, nmax, weights, iscale);
    if (s.wll > 0.0f && s.wxl * s.wxl > best * s.wll) {
      store_symmetric_codes(x, nmax, iscale, L);
      scale = s.wxl / s.wll;
      best = scale * s.wxl;
    }
  }
  return scale;
}

float search_q3_scale(std::span<const float> x, int nmax, std::int8_t* L) {
  const SignedMax m = signed_max(x);
  const std::size_t n = x.size();
  if (m.magnitude < kGroupMaxEps) {
    std::fill(L, L + n, std::int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / m.value;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const int l = clamp_code(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - w * li * li;
      const int l = clamp_code(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      const float lf = static_cast<float>(l);
      slx += w * x[i] * lf;
      sl2 += w * lf * lf;
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<std::int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (std::size_t i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

float search_scale_and_min(std::span<const float> x, int nmax, std::span<const float> weights, std::uint8_t* L,
                           float& the_min, std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  const std::size_t n = x.size();
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (std::size_t i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, std::uint8_t{0});
    the_min = -min;
    return 0.0f;
  }
  auto error = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  auto codes = [&](float iscale, std::uint8_t* out) {
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = static_cast<std::uint8_t>(clamp_code(nearest_int(iscale * (x[i] - min)), 0, nmax));
    }
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  codes(iscale, L);
  float best_err = 0.0f;
  for (std::size_t i = 0; i < n; ++i) best_err += weights[i] * error(scale * static_cast<float>(L[i]) + min - x[i]);
  if (nstep < 1) {
    the_min = -min;
    return scale;
  }
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (max - min);
    codes(iscale, Laux);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
      const float l = static_cast<float>(Laux[i]);
      sum_l += weights[i] * l;
      sum_l2 += weights[i] * l * l;
      sum_xl += weights[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0.0f;
    for (std::size_t i = 0; i < n; ++i) err += weights[i] * error(this_scale * static_cast<float>(Laux[i]) + this_min - x[i]);
    if (err < best_err) {
      std::copy(Laux, Laux + n, L);
      best_err = err;
      scale = this_scale;
      min = this_min;
    }
  }
  the_min = -min;
  return scale;
}

int nearest_grid_index(const std::int8_t* values, float v) {
  constexpr int kN = 16;
  if (v <= static_cast<float>(values[0])) return 0;
  if (v >= static_cast<float>(values[kN - 1])) return kN - 1;
  int lo = 0, hi = kN - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < static_cast<float>(values[mid])) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(values[hi - 1]) < static_cast<float>(values[hi]) - v ? hi - 1 : hi;
}

}  // namespace peregrine::ggml

#include "peregrine/kernels/cpu/matmul/token_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/token_quantize.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// colmax[c] = max over tokens of |x[t, c]|.
void ColumnAbsMax(const float* HWY_RESTRICT x, std::size_t n_tokens, std::size_t in, float* HWY_RESTRICT colmax) {
  const hn::ScalableTag<float> d;
  const std::size_t n = hn::Lanes(d);
  std::fill(colmax, colmax + in, 0.0f);
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * in;
    std::size_t i = 0;
    for (; i + n <= in; i += n) hn::StoreU(hn::Max(hn::LoadU(d, colmax + i), hn::Abs(hn::LoadU(d, xt + i))), d, colmax + i);
    for (; i < in; ++i) colmax[i] = std::max(colmax[i], std::fabs(xt[i]));
  }
}

// One token row: keep[c] is 1 for the int8 columns and 0 for the outlier columns.
float QuantizeToken(const float* HWY_RESTRICT x, const float* HWY_RESTRICT keep, std::size_t in,
                    std::int8_t* HWY_RESTRICT q) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<std::int8_t, decltype(d)> d8;
  const std::size_t n = hn::Lanes(d);
  auto amax_v = hn::Zero(d);
  std::size_t i = 0;
  for (; i + n <= in; i += n) amax_v = hn::Max(amax_v, hn::Abs(hn::Mul(hn::LoadU(d, x + i), hn::LoadU(d, keep + i))));
  float amax = hn::GetLane(hn::MaxOfLanes(d, amax_v));
  for (; i < in; ++i) amax = std::max(amax, std::fabs(x[i] * keep[i]));
  const float scale = amax / 127.0f, inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  const auto inv_v = hn::Set(d, inv);
  for (i = 0; i + n <= in; i += n) {
    const auto xk = hn::Mul(hn::LoadU(d, x + i), hn::LoadU(d, keep + i));
    hn::StoreU(hn::DemoteTo(d8, hn::NearestInt(hn::Mul(xk, inv_v))), d8, q + i);
  }
  for (; i < in; ++i) q[i] = static_cast<std::int8_t>(std::nearbyint(x[i] * keep[i] * inv));
  return scale;
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

HWY_EXPORT(ColumnAbsMax);
HWY_EXPORT(QuantizeToken);

void resize(TokenQuantizedActivations& out, std::int64_t n_tokens, std::int64_t in) {
  out.n_tokens = n_tokens;
  out.in = in;
  out.outliers.clear();
  out.scale.resize(static_cast<std::size_t>(n_tokens));
  out.q.resize(static_cast<std::size_t>(n_tokens * in));
}

}  // namespace

void quantize_tokens(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                     float outlier_threshold, TokenQuantizedActivations& out) {
  resize(out, n_tokens, in);
  thread_local std::vector<float> keep;  // 1 per int8 column, 0 per outlier column
  keep.assign(static_cast<std::size_t>(in), 1.0f);
  if (outlier_threshold > 0.0f) {
    thread_local std::vector<float> colmax;
    colmax.resize(static_cast<std::size_t>(in));
    HWY_DYNAMIC_DISPATCH(ColumnAbsMax)(x.data(), static_cast<std::size_t>(n_tokens), static_cast<std::size_t>(in), colmax.data());
    for (std::int64_t c = 0; c < in; ++c) {
      if (colmax[static_cast<std::size_t>(c)] >= outlier_threshold) {
        out.outliers.push_back(c);
        keep[static_cast<std::size_t>(c)] = 0.0f;
      }
    }
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    out.scale[static_cast<std::size_t>(t)] = HWY_DYNAMIC_DISPATCH(QuantizeToken)(
        x.data() + t * in, keep.data(), static_cast<std::size_t>(in), out.q.data() + t * in);
  }
}

void quantize_tokens_reference(std::span<const float> x, std::int64_t n_tokens, std::int64_t in,
                               float outlier_threshold, TokenQuantizedActivations& out) {
  resize(out, n_tokens, in);
  std::vector<bool> outlier(static_cast<std::size_t>(in), false);
  for (std::int64_t c = 0; c < in && outlier_threshold > 0.0f; ++c) {
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      if (std::fabs(x[static_cast<std::size_t>(t * in + c)]) >= outlier_threshold) outlier[static_cast<std::size_t>(c)] = true;
    }
    if (outlier[static_cast<std::size_t>(c)]) out.outliers.push_back(c);
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x.data() + t * in;
    float amax = 0.0f;
    for (std::int64_t c = 0; c < in; ++c) {
      if (!outlier[static_cast<std::size_t>(c)]) amax = std::max(amax, std::fabs(xt[c]));
    }
    const float scale = amax / 127.0f, inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (std::int64_t c = 0; c < in; ++c) {
      // nearbyint rounds half to even in the default rounding mode, like the SIMD conversion.
      const bool int8 = !outlier[static_cast<std::size_t>(c)];
      out.q[static_cast<std::size_t>(t * in + c)] = int8 ? static_cast<std::int8_t>(std::nearbyint(xt[c] * inv)) : 0;
    }
    out.scale[static_cast<std::size_t>(t)] = scale;
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE

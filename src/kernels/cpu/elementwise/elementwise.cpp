// SIMD RMSNorm, RoPE rotation, SwiGLU and GeGLU (see elementwise.h); scalar tails for lengths that
// are not a multiple of the vector length. The scalar twins are in elementwise_reference.cpp.

#include "peregrine/kernels/cpu/elementwise/elementwise.h"

#include <cmath>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise/elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Σ x[i]² over four vector accumulators (independent FMA chains), then the lanes.
float sum_of_squares(const float* HWY_RESTRICT x, std::int64_t n) {
  const D d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  V s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  std::int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const V a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + N);
    const V c = hn::LoadU(d, x + i + 2 * N), e = hn::LoadU(d, x + i + 3 * N);
    s0 = hn::MulAdd(a, a, s0), s1 = hn::MulAdd(b, b, s1), s2 = hn::MulAdd(c, c, s2), s3 = hn::MulAdd(e, e, s3);
  }
  for (; i + N <= n; i += N) {
    const V a = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

void RmsNormImpl(const float* x, const float* w, float* out, std::int64_t n, float eps) {
  const D d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sum_of_squares(x, n)) / static_cast<double>(n) + eps));
  const V scale_v = hn::Set(d, scale);
  std::int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), scale_v), hn::LoadU(d, w + i)), d, out + i);
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// x[ia..] ← x[ia..]·cos[ia..] + x[ib..]·sin[ia..] and x[ib..] ← x[ib..]·cos[ib..] +
// x[ia..]·sin[ib..] on Lanes(d) pairs: the one rounding sequence every pair goes through, so
// both pairings and the vector body and tail give bit-identical rotations.
template <class DT>
HWY_INLINE void rotate_pairs(DT d, float* HWY_RESTRICT x, const float* HWY_RESTRICT cos,
                             const float* HWY_RESTRICT sin, std::int64_t ia, std::int64_t ib) {
  const auto a = hn::LoadU(d, x + ia), b = hn::LoadU(d, x + ib);
  hn::StoreU(hn::MulAdd(b, hn::LoadU(d, sin + ia), hn::Mul(a, hn::LoadU(d, cos + ia))), d, x + ia);
  hn::StoreU(hn::MulAdd(a, hn::LoadU(d, sin + ib), hn::Mul(b, hn::LoadU(d, cos + ib))), d, x + ib);
}

// x'[j] = x[j]·cos[j] + x[partner(j)]·sin[j] on one head. NeoX: the two halves side by side;
// interleaved: partners are adjacent lanes (Reverse2, same arithmetic as rotate_pairs); the
// pairs left over go one at a time.
void rotate_head(float* HWY_RESTRICT x, std::int64_t head_dim, const float* HWY_RESTRICT cos,
                 const float* HWY_RESTRICT sin, RopeStyle style) {
  const D d;
  const hn::CappedTag<float, 1> d1;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t half = head_dim / 2;
  std::int64_t i = 0;  // pairs done
  if (style == RopeStyle::kNeox) {
    for (; i + N <= half; i += N) rotate_pairs(d, x, cos, sin, i, i + half);
    for (; i < half; ++i) rotate_pairs(d1, x, cos, sin, i, i + half);
    return;
  }
  if (N >= 2) {
    for (; 2 * i + N <= head_dim; i += N / 2) {
      const V v = hn::LoadU(d, x + 2 * i);
      hn::StoreU(hn::MulAdd(hn::Reverse2(d, v), hn::LoadU(d, sin + 2 * i), hn::Mul(v, hn::LoadU(d, cos + 2 * i))), d, x + 2 * i);
    }
  }
  for (; i < half; ++i) rotate_pairs(d1, x, cos, sin, 2 * i, 2 * i + 1);
}

void RopeRotateImpl(float* x, std::int64_t n_heads, std::int64_t head_dim, const float* cos,
                    const float* sin, RopeStyle style) {
  for (std::int64_t h = 0; h < n_heads; ++h) rotate_head(x + h * head_dim, head_dim, cos, sin, style);
}

// gate ← g / (1 + e^min(-g, 88)) · up on Lanes(d) entries (e^88 < FLT_MAX).
template <class DT>
HWY_INLINE void swiglu_lanes(DT d, float* HWY_RESTRICT gate, const float* HWY_RESTRICT up) {
  const auto g = hn::LoadU(d, gate);
  const auto e = hn::Exp(d, hn::Min(hn::Neg(g), hn::Set(d, 88.0f)));
  hn::StoreU(hn::Mul(hn::Div(g, hn::Add(hn::Set(d, 1.0f), e)), hn::LoadU(d, up)), d, gate);
}

// Runs Op::lanes (swiglu_lanes / geglu_lanes) over n entries: full vectors, then one lane at a time.
template <class Op>
void gated_loop(float* gate, const float* up, std::int64_t n) {
  const D d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + N <= n; i += N) Op::lanes(d, gate + i, up + i);
  for (; i < n; ++i) Op::lanes(hn::CappedTag<float, 1>(), gate + i, up + i);
}

struct SwiGluOp {
  template <class DT>
  static HWY_INLINE void lanes(DT d, float* HWY_RESTRICT gate, const float* HWY_RESTRICT up) { swiglu_lanes(d, gate, up); }
};

void SwiGluImpl(float* gate, const float* up, std::int64_t n) { gated_loop<SwiGluOp>(gate, up, n); }

// gate ← g / (1 + e^min(-2u, 88)) · up, u = sqrt(2/π)·(g + 0.044715·g³), on Lanes(d) entries:
// 0.5·g·(1 + tanh(u)) written as g·sigmoid(2u).
template <class DT>
HWY_INLINE void geglu_lanes(DT d, float* HWY_RESTRICT gate, const float* HWY_RESTRICT up) {
  const auto g = hn::LoadU(d, gate);
  const auto inner = hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), g), hn::Mul(g, g), g);
  const auto minus_2u = hn::Mul(hn::Set(d, -1.5957691216057308f), inner);  // -2·sqrt(2/π)
  const auto e = hn::Exp(d, hn::Min(minus_2u, hn::Set(d, 88.0f)));
  hn::StoreU(hn::Mul(hn::Div(g, hn::Add(hn::Set(d, 1.0f), e)), hn::LoadU(d, up)), d, gate);
}

struct GeGluOp {
  template <class DT>
  static HWY_INLINE void lanes(DT d, float* HWY_RESTRICT gate, const float* HWY_RESTRICT up) { geglu_lanes(d, gate, up); }
};

void GeGluImpl(float* gate, const float* up, std::int64_t n) { gated_loop<GeGluOp>(gate, up, n); }

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(RopeRotateImpl);
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(GeGluImpl);

void rmsnorm(const float* x, const float* w, float* out, std::int64_t n, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, w, out, n, eps);
}

void rope_table(std::int32_t pos, std::int64_t head_dim, float theta, RopeStyle style,
                float* cos, float* sin, const float* freq_factors) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    double freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (freq_factors != nullptr) freq /= static_cast<double>(freq_factors[i]);
    const double angle = static_cast<double>(pos) * freq;
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    const std::int64_t ia = style == RopeStyle::kInterleaved ? 2 * i : i;
    const std::int64_t ib = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    cos[ia] = cos[ib] = c;
    sin[ia] = -s;
    sin[ib] = s;
  }
}

void rope_rotate(float* x, std::int64_t n_heads, std::int64_t head_dim, const float* cos,
                 const float* sin, RopeStyle style) {
  HWY_DYNAMIC_DISPATCH(RopeRotateImpl)(x, n_heads, head_dim, cos, sin, style);
}

void rope(float* x, std::int64_t n_heads, std::int64_t head_dim, std::int32_t pos, float theta,
          RopeStyle style) {
  std::vector<float> table(static_cast<std::size_t>(2 * head_dim));
  rope_table(pos, head_dim, theta, style, table.data(), table.data() + head_dim);
  rope_rotate(x, n_heads, head_dim, table.data(), table.data() + head_dim, style);
}

void swiglu(float* gate, const float* up, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, n);
}

void geglu(float* gate, const float* up, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeGluImpl)(gate, up, n);
}

void gated_activation(FfnActivation act, float* gate, const float* up, std::int64_t n) {
  if (act == FfnActivation::kGeluTanh) return geglu(gate, up, n);
  swiglu(gate, up, n);
}

}  // namespace peregrine
#endif  // HWY_ONCE

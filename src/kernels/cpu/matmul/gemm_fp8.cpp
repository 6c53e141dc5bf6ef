#include "peregrine/kernels/cpu/matmul/gemm_fp8.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/matmul/decoded_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

// Decodes FP8 rows {f32 s; uint8 f[in]} to f32 weights s · fp8(f), in value order: the
// RowDecoder of decoded_matmul-inl.h. Two vectors per unit (two FMA chains in Dot).
template <bool kE4M3>
class Fp8RowDecoder {
 public:
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  static constexpr std::size_t kVectors = 2;
  static constexpr std::size_t kUnit = kVectors * hn::MaxLanes(D());

  Fp8RowDecoder(const std::uint8_t* w, std::size_t in) : w_(w), in_(in) {}

  const std::uint8_t* data() const { return w_; }
  std::size_t row_bytes() const { return kRowScaleBytes + in_; }

  void Stage(const float* HWY_RESTRICT x, float* HWY_RESTRICT dst) const {
    std::copy(x, x + in_, dst);
    std::fill(dst + in_, dst + (in_ + kUnit - 1) / kUnit * kUnit, 0.0f);
  }

  // Σ fp8(f_i)·x_i over the row, times the row scale once at the end. E4M3's NaN codes are
  // found per unit on the bytes (cheaper than per decoded vector): any makes the result NaN.
  HWY_INLINE float Dot(std::size_t row, const float* HWY_RESTRICT xs, std::uintptr_t next) const {
    const D d;
    const hn::CappedTag<std::uint8_t, kUnit> d8;
    const std::size_t n = hn::Lanes(d);
    V acc[kVectors];
    for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::Zero(d);
    auto nan_codes = hn::Zero(d8);
    const std::uint8_t* codes = w_ + row * row_bytes() + kRowScaleBytes;
    next += kRowScaleBytes;
    ForEachCodeUnit(codes, 0, in_, [&](std::size_t u, const std::uint8_t* p) {
      hwy::Prefetch(reinterpret_cast<const char*>(next + u));
      for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::MulAdd(DecodeFinite(p + j * n), hn::Load(d, xs + u + j * n), acc[j]);
      if constexpr (kE4M3) {
        const auto low7 = hn::Set(d8, 0x7f);
        for (std::size_t i = 0; i < kUnit; i += hn::Lanes(d8)) {
          nan_codes = hn::Or(nan_codes, hn::VecFromMask(d8, hn::Eq(hn::And(hn::LoadU(d8, p + i), low7), low7)));
        }
      }
    });
    if (kE4M3 && !hn::AllFalse(d8, hn::Ne(nan_codes, hn::Zero(d8)))) return hn::GetLane(hn::NaN(d));
    return RowScale(row) * hn::GetLane(hn::SumOfLanes(d, hn::Add(acc[0], acc[1])));
  }

  // Calls fn(u, w) for the units u = begin, begin + kUnit, … < end of row `row`, w[j] the
  // weights of values u + j·Lanes … (0 past the row length).
  template <class Fn>
  HWY_INLINE void ForEachUnit(std::size_t row, std::size_t begin, std::size_t end, Fn&& fn) const {
    const D d;
    const std::size_t n = hn::Lanes(d);
    const V scale = hn::Set(d, RowScale(row));
    ForEachCodeUnit(w_ + row * row_bytes() + kRowScaleBytes, begin, end, [&](std::size_t u, const std::uint8_t* p) {
      V w[kVectors];
      for (std::size_t j = 0; j < kVectors; ++j) w[j] = hn::Mul(Decode(p + j * n), scale);
      fn(u, w);
    });
  }

 private:
  // The row's scale, times 2^8 for E4M3 (whose bytes Decode to 2^-8 of their value).
  float RowScale(std::size_t row) const {
    float s;
    std::memcpy(&s, w_ + row * row_bytes(), sizeof s);
    return kE4M3 ? s * 256.0f : s;
  }

  // Calls fn(u, p) with the kUnit bytes of each unit u in [begin, end): in place, or for the
  // row's last values a zero-padded copy (code 0 is +0).
  template <class Fn>
  HWY_INLINE void ForEachCodeUnit(const std::uint8_t* codes, std::size_t begin, std::size_t end, Fn&& fn) const {
    const std::size_t fast_end = std::min(end, in_ / kUnit * kUnit);
    std::size_t u = begin;
    for (; u < fast_end; u += kUnit) fn(u, codes + u);
    for (; u < end; u += kUnit) {
      alignas(16) std::uint8_t tail[kUnit] = {};
      std::memcpy(tail, codes + u, std::min(kUnit, in_ - std::min(u, in_)));
      fn(u, tail);
    }
  }

  // Lanes(D) FP8 bytes at p → f32: E5M2 = the upper byte of an f16 (exact, inf/NaN included);
  // E4M3 S.EEEE.MMM → f16 bits S.0EEEE.MMM0000000 (the byte sign-extended, shifted by 7, bit 14
  // cleared), worth 2^-8 of the E4M3 value (normal: 2^(E−15)·1.M vs 2^(E−7)·1.M; subnormal:
  // M·2^-17 vs M·2^-9); E4M3's NaN (S.1111.111) reads ±1.875 here, Decode makes it NaN.
  HWY_INLINE static V DecodeFinite(const std::uint8_t* HWY_RESTRICT p) {
    const D d;
    const hn::Rebind<hwy::float16_t, D> dh;
    if constexpr (kE4M3) {
      const hn::Rebind<std::int16_t, D> d16;
      const auto b = hn::PromoteTo(d16, hn::LoadU(hn::Rebind<std::int8_t, D>(), reinterpret_cast<const std::int8_t*>(p)));
      return hn::PromoteTo(d, hn::BitCast(dh, hn::And(hn::ShiftLeft<7>(b), hn::Set(d16, static_cast<std::int16_t>(0xBFFF)))));
    } else {
      const hn::Rebind<std::uint16_t, D> d16;
      const V f = hn::PromoteTo(d, hn::BitCast(dh, hn::ShiftLeft<8>(hn::PromoteTo(d16, hn::LoadU(hn::Rebind<std::uint8_t, D>(), p)))));
#if (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4) || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
      // Without F16C (x86 below AVX2) or another hardware f16 conversion (NEON has one), Highway
      // 1.0.3 widens f16 exponent 31 as a normal number (±2^16·1.M): make E5M2's infinities and
      // NaNs (no finite E5M2 value reaches 2^16) infinite and NaN again.
      const V a = hn::Abs(f), inf = hn::Set(d, std::numeric_limits<float>::infinity());
      const V special = hn::IfThenElse(hn::Eq(a, hn::Set(d, 65536.0f)), hn::CopySign(inf, f), hn::NaN(d));
      return hn::IfThenElse(hn::Ge(a, hn::Set(d, 65536.0f)), special, f);
#else
      return f;
#endif
    }
  }
  HWY_INLINE static V Decode(const std::uint8_t* HWY_RESTRICT p) {
    const D d;
    const V f = DecodeFinite(p);
    if constexpr (kE4M3) return hn::IfThenElse(hn::Eq(hn::Abs(f), hn::Set(d, 1.875f)), hn::NaN(d), f);
    return f;
  }

  const std::uint8_t* w_;
  std::size_t in_;
};

template <bool kE4M3>
void GemmFp8Format(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
                   std::int64_t row_begin, std::int64_t row_end) {
  const auto in = static_cast<std::size_t>(w.row_length());
  Fp8RowDecoder<kE4M3> dec(static_cast<const std::uint8_t*>(w.data), in);
  DecodedMatmulRows(dec, in, x, static_cast<std::size_t>(n_tokens), y, static_cast<std::size_t>(w.n_rows()),
                    static_cast<std::size_t>(row_begin), static_cast<std::size_t>(row_end));
}

void GemmFp8(const TensorView& w, const float* x, std::int64_t n_tokens, float* y,
             std::int64_t row_begin, std::int64_t row_end) {
  if (w.dtype == DType::kF8E4M3) {
    GemmFp8Format<true>(w, x, n_tokens, y, row_begin, row_end);
  } else {
    GemmFp8Format<false>(w, x, n_tokens, y, row_begin, row_end);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {

HWY_EXPORT(GemmFp8);

void gemm_fp8(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
              std::span<float> y, std::int64_t row_begin, std::int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(GemmFp8)(w, x.data(), n_tokens, y.data(), row_begin, row_end);
}

}  // namespace peregrine
#endif  // HWY_ONCE

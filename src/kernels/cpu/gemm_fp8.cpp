#include "peregrine/kernels/cpu/gemm_fp8.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemm_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/decoded_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

// Decodes FP8 rows {f32 s; uint8 f[in]} to f32 weights s · fp8(f): the RowDecoder of
// decoded_matmul-inl.h. Two vectors per unit (two FMA chains in the GEMV).
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

  HWY_INLINE void Start(std::size_t row, std::size_t /*begin*/) {
    const std::uint8_t* p = w_ + row * row_bytes();
    float s;
    std::memcpy(&s, p, sizeof s);
    // E4M3 bytes decode to 2^-8 of their value (see Decode).
    scale_ = hn::Set(D(), kE4M3 ? s * 256.0f : s);
    codes_ = p + kRowScaleBytes;
  }

  HWY_INLINE void Unit(std::size_t u, V (&w)[kVectors]) const {
    const D d;
    const std::size_t n = hn::Lanes(d);
    for (std::size_t j = 0; j < kVectors; ++j) {
      const std::size_t i = u + j * n;
      if (i + n <= in_) {
        w[j] = hn::Mul(Decode(codes_ + i), scale_);
      } else if (i < in_) {  // the row's last bytes, zero-padded (code 0 is +0)
        alignas(16) std::uint8_t tail[hn::MaxLanes(D())] = {};
        std::memcpy(tail, codes_ + i, in_ - i);
        w[j] = hn::Mul(Decode(tail), scale_);
      } else {
        w[j] = hn::Zero(d);
      }
    }
  }

 private:
  // Lanes(D) FP8 bytes at p → f32: E5M2 = the upper byte of an f16 (exact, inf/NaN included);
  // E4M3 S.EEEE.MMM → f16 bits S.0EEEE.MMM0000000, worth 2^-8 of the E4M3 value (normal:
  // 2^(E−15)·1.M vs 2^(E−7)·1.M; subnormal: M·2^-17 vs M·2^-9), so NaN (S.1111.111) is 1.875.
  HWY_INLINE static V Decode(const std::uint8_t* HWY_RESTRICT p) {
    const D d;
    const hn::Rebind<std::uint8_t, D> d8;
    const hn::Rebind<std::uint16_t, D> d16;
    const hn::Rebind<hwy::float16_t, D> dh;
    const auto b = hn::PromoteTo(d16, hn::LoadU(d8, p));
    if constexpr (kE4M3) {
      const auto h = hn::Or(hn::ShiftLeft<8>(hn::And(b, hn::Set(d16, 0x80))),
                            hn::ShiftLeft<7>(hn::And(b, hn::Set(d16, 0x7f))));
      const V f = hn::PromoteTo(d, hn::BitCast(dh, h));
      return hn::IfThenElse(hn::Eq(hn::Abs(f), hn::Set(d, 1.875f)), hn::NaN(d), f);
    } else {
      return hn::PromoteTo(d, hn::BitCast(dh, hn::ShiftLeft<8>(b)));
    }
  }

  const std::uint8_t* w_;
  std::size_t in_;
  const std::uint8_t* codes_ = nullptr;
  V scale_;
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

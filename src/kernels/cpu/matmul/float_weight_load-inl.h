// Per-target helpers of the float-weight kernels (gemv_float.cpp, gemm_float.cpp) and of the
// attention kernels' f16 KV tiles (attention.cpp): read F32 / F16 / BF16 values, at any byte
// alignment, as f32 vectors or scalars.
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_FLOAT_WEIGHT_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_FLOAT_WEIGHT_LOAD_INL_H_
#undef PEREGRINE_KERNELS_CPU_FLOAT_WEIGHT_LOAD_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_FLOAT_WEIGHT_LOAD_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

#include "peregrine/core/dtype.h"
#include "peregrine/quant/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(d) weights starting at p, widened to f32 (F16: F16C vcvtph2ps where the target has
// it; BF16: the 16 bits shifted into the high half of an f32). Unaligned loads throughout.
template <class D>
HWY_INLINE hn::Vec<D> LoadAsF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadAsF32(D d, const hwy::float16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::float16_t, D>(), p));
}
template <class D>
HWY_INLINE hn::Vec<D> LoadAsF32(D d, const hwy::bfloat16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::bfloat16_t, D>(), p));
}

// One weight widened to f32, read bytewise (the pointer may be misaligned for its type).
HWY_INLINE float ScalarAsF32(const float* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
HWY_INLINE float ScalarAsF32(const hwy::float16_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return f16_to_f32(bits);
}
HWY_INLINE float ScalarAsF32(const hwy::bfloat16_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return bf16_to_f32(bits);
}

// Calls fn(WT{}) with the Highway element type of a float weight dtype (F32 → float,
// F16 → hwy::float16_t, BF16 → hwy::bfloat16_t); other dtypes are a caller bug.
template <class Fn>
HWY_INLINE void WithWeightType(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32:
      fn(float{});
      return;
    case DType::kF16:
      fn(hwy::float16_t{});
      return;
    case DType::kBF16:
      fn(hwy::bfloat16_t{});
      return;
    default:
      HWY_ASSERT(false);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

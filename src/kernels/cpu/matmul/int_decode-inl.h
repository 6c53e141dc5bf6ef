// Per-target SIMD unpacking of kInt codes (layout in core/dtype.h: `bits`-bit codes packed
// LSB-first, value i at stream bits [i·bits, (i+1)·bits), rows at any byte) and the f32 row
// decoder of gemm_int (a RowDecoder of decoded_matmul-inl.h).
//
// Codes are unpacked a unit at a time; a unit's codes start on a byte. The order in which a
// unit's values come out of the unpacker (its "slots") is chosen per bit width to need the
// fewest instructions, and the activations are staged in the same order (Stage), so that each
// slot meets its own activation:
//   8 bits: two vectors of bytes widened to 32-bit lanes, in value order;
//   4 bits: one vector of bytes widened to 32-bit lanes; byte & 15 is the even value of each
//     pair and byte >> 4 the odd one, so slot j·N + k holds value 2k + j (N = f32 lanes);
//   2 bits: likewise four vectors (byte >> 2s) & 3, slot s·N + k holding value 4k + s;
//   3 bits (8 values = 3 bytes, values cross bytes): 32 values in value order: the unit's 12
//     bytes are broadcast to every 128-bit block, a byte shuffle puts the two bytes holding
//     each value into its 32-bit lane, a per-lane shift and a mask extract it.
// IntCodeUnpacker16 unpacks to int16 lanes in value order for gemm_int8_act (a 16-byte shuffle
// covers 32 values of up to 4 bits). The 1-lane HWY_SCALAR target unpacks 3-bit codes (and the
// int16 ones below 8 bits) one by one instead.
//
// Highway "-inl.h" convention: re-included once per target by foreach_target, so the include
// guard toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(PEREGRINE_KERNELS_CPU_INT_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PEREGRINE_KERNELS_CPU_INT_DECODE_INL_H_
#undef PEREGRINE_KERNELS_CPU_INT_DECODE_INL_H_
#else
#define PEREGRINE_KERNELS_CPU_INT_DECODE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/matmul/int_row_layout.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Code i of the unit whose loaded bytes start at p (kLoadBytes of them readable): the scalar
// unpacking of the 1-lane HWY_SCALAR target, which has no byte shuffles.
template <int kBits, std::size_t kLoadBytes>
HWY_INLINE std::uint32_t CodeAt(const std::uint8_t* p, std::size_t i) {
  const std::size_t bit = i * kBits, byte = bit / 8;
  std::uint32_t v = p[byte];
  if (bit % 8 + kBits > 8 && byte + 1 < kLoadBytes) v |= std::uint32_t{p[byte + 1]} << 8;
  return (v >> (bit % 8)) & ((1u << kBits) - 1);
}

// Whether lanes of 16 bits have a native per-lane shift (AVX-512BW); below, Highway 1.0.3
// emulates it (and its SSSE3 emulation does not compile), so the 16-bit unpacker multiplies by a
// per-lane power of two instead.
constexpr bool kNative16BitShifts = HWY_TARGET <= HWY_AVX3;

// For a byte shuffle + per-lane shift unpacker of lanes of type T (32 or 16 bits) at values
// first .. first + Lanes − 1: per lane, the byte offsets of the value's two bytes (b0 in the
// low byte, b0 + 1 above, clamped to the 128-bit block; a value that needs the second byte
// never starts past byte 14) and the value's bit offset in b0 (`shift`), or with kMultiply the
// factor 2^(8 − shift) that moves the value to bit 8.
template <int kBits, bool kMultiply = false, class DU>
HWY_INLINE void ShuffleTables(DU du, std::size_t first, hn::Vec<DU>& index, hn::Vec<DU>& shift) {
  using T = hn::TFromD<DU>;
  HWY_ALIGN T idx[hn::MaxLanes(DU())], sh[hn::MaxLanes(DU())];
  for (std::size_t k = 0; k < hn::Lanes(du); ++k) {
    const std::size_t bit = (first + k) * kBits, b0 = bit / 8, b1 = std::min<std::size_t>(b0 + 1, 15);
    idx[k] = static_cast<T>(sizeof(T) == 4 ? b0 | b1 << 8 | b1 << 16 | b1 << 24 : b0 | b1 << 8);
    sh[k] = static_cast<T>(kMultiply ? 1u << (8 - bit % 8) : bit % 8);
  }
  index = hn::Load(du, idx);
  shift = hn::Load(du, sh);
}

// Where unit u (value u; its codes start on a byte) of a row's `code_bytes` packed `kBits`-bit
// codes can be read kLoadBytes at a time: in place, or for the row's last units (whose load would
// leave the row, perhaps the tensor) from `tail`, a zero-padded copy.
template <int kBits, std::size_t kLoadBytes>
HWY_INLINE const std::uint8_t* UnitBytes(const std::uint8_t* codes, std::size_t code_bytes, std::size_t u,
                                         std::uint8_t (&tail)[kLoadBytes]) {
  const std::size_t byte = u * kBits / 8;
  if (byte + kLoadBytes <= code_bytes) return codes + byte;
  std::memset(tail, 0, sizeof tail);
  if (byte < code_bytes) std::memcpy(tail, codes + byte, std::min(code_bytes - byte, sizeof tail));
  return tail;
}

// Unpacks units of `kBits`-bit codes to f32 lanes (in slot order, see the file comment).
template <int kBits>
class IntCodeUnpacker {
 public:
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  static constexpr std::size_t kLanes = hn::MaxLanes(D());
  // Values per unit and f32 vectors per unit.
  static constexpr std::size_t kUnit = kBits == 3 ? 32 : kBits == 2 ? 4 * kLanes : 2 * kLanes;
  static constexpr std::size_t kVectors = kUnit / kLanes;
  static_assert(kVectors * kLanes == kUnit, "f32 vectors must tile the unit");
  // Bytes a unit's load reads from its start (>= the unit's kUnit·kBits/8 bytes of codes).
  static constexpr std::size_t kLoadBytes = kBits == 3 ? 16 : kUnit * kBits / 8;

  IntCodeUnpacker() {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kBits == 3) {
      for (std::size_t j = 0; j < kVectors; ++j) ShuffleTables<kBits>(hn::RebindToUnsigned<D>(), j * kLanes, index_[j], shift_[j]);
    }
#endif
  }

  // Value of unit slot s (see the file comment).
  static constexpr std::size_t SlotValue(std::size_t s) {
    const std::size_t j = s / kLanes, k = s % kLanes;
    if constexpr (kBits == 4) return 2 * k + j;
    if constexpr (kBits == 2) return 4 * k + j;
    return s;
  }

  // The f32 whose bits are 0x4B000000 | c is kBias + c exactly (c < 2^23): codes become floats
  // without a conversion, and (kBias + q) − (kBias + zero) is exactly q − zero.
  static constexpr float kBias = 8388608.0f;  // 2^23

  // q[j] = kBias + the codes of slots j·Lanes … (j+1)·Lanes − 1 of the unit whose codes start
  // at p (kLoadBytes readable).
  HWY_INLINE void Unpack(const std::uint8_t* HWY_RESTRICT p, V (&q)[kVectors]) const {
    const D d;
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<std::uint8_t, D> d8;
    const auto bias = hn::Set(du, 0x4B000000u);
    auto biased = [&](hn::Vec<decltype(du)> c) { return hn::BitCast(d, hn::Or(c, bias)); };
    if constexpr (kBits == 8) {
      for (std::size_t j = 0; j < kVectors; ++j) q[j] = biased(hn::PromoteTo(du, hn::LoadU(d8, p + j * kLanes)));
    } else if constexpr (kBits == 3) {
#if HWY_TARGET == HWY_SCALAR
      for (std::size_t j = 0; j < kVectors; ++j) q[j] = biased(hn::Set(du, CodeAt<kBits, kLoadBytes>(p, j)));
#else
      const hn::Repartition<std::uint8_t, D> dbytes;
      const auto bytes = hn::LoadDup128(dbytes, p);
      for (std::size_t j = 0; j < kVectors; ++j) {
        const auto pair = hn::BitCast(du, hn::TableLookupBytes(bytes, hn::BitCast(dbytes, index_[j])));
        q[j] = biased(hn::And(hn::Shr(pair, shift_[j]), hn::Set(du, 7u)));
      }
#endif
    } else {
      const auto b = hn::PromoteTo(du, hn::LoadU(d8, p));
      const auto mask = hn::Set(du, (1u << kBits) - 1);
      q[0] = biased(hn::And(b, mask));
      if constexpr (kBits == 4) {
        q[1] = biased(hn::ShiftRight<4>(b));  // the top field needs no mask
      } else {
        q[1] = biased(hn::And(hn::ShiftRight<2>(b), mask));
        q[2] = biased(hn::And(hn::ShiftRight<4>(b), mask));
        q[3] = biased(hn::ShiftRight<6>(b));
      }
    }
  }

  // The end of the units (from 0) whose load stays inside the row's codes and whose values all
  // lie inside the row.
  static std::size_t SafeUnitsEnd(const IntRowLayout& layout) {
    const std::size_t code_bytes = layout.code_bytes();
    const std::size_t by_bytes =
        code_bytes < kLoadBytes ? 0 : ((code_bytes - kLoadBytes) * 8 / kBits / kUnit + 1) * kUnit;
    return std::min(by_bytes, static_cast<std::size_t>(layout.in) / kUnit * kUnit);
  }

 private:
  using VU = hn::Vec<hn::RebindToUnsigned<D>>;
  VU index_[kVectors];  // 3 bits: byte shuffle per 32-bit lane
  VU shift_[kVectors];  // 3 bits: bit offset of the value in its lane
};

// The f16 at p (any alignment) widened to f32, inline (F16C where the target has it).
HWY_INLINE float LoadF16(const std::uint8_t* p) {
  const hn::CappedTag<float, 1> d;
  const hn::Rebind<hwy::float16_t, decltype(d)> dh;
  return hn::GetLane(hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

// Decodes kInt rows to f32 weights, in the unpacker's slot order (the RowDecoder of
// decoded_matmul-inl.h). A weight is (q − zero)·scale, both steps exact: q − zero from the
// biased codes, and the product has at most 9 + 11 significant bits (f16 scale), so the vectors
// hold exactly what dequantize_int_row computes.
template <int kBits>
class IntRowDecoder {
 public:
  using Unpacker = IntCodeUnpacker<kBits>;
  using D = typename Unpacker::D;
  using V = typename Unpacker::V;
  static constexpr std::size_t kUnit = Unpacker::kUnit;
  static constexpr std::size_t kVectors = Unpacker::kVectors;

  IntRowDecoder(const IntRowLayout& layout, const std::uint8_t* w)
      : layout_(layout), w_(w), safe_units_end_(Unpacker::SafeUnitsEnd(layout)) {
    const auto gs = static_cast<std::size_t>(layout.group_size);
    if (gs % kUnit == 0) whole_groups_ = safe_units_end_ / gs;
    if (gs < kUnit && kUnit % gs == 0 && kUnit / gs <= Unpacker::kLanes) {
      unit_groups_ = kUnit / gs;
      const hn::RebindToSigned<D> di;
      HWY_ALIGN std::int32_t idx[hn::MaxLanes(hn::RebindToSigned<D>())];
      for (std::size_t j = 0; j < kVectors; ++j) {
        for (std::size_t k = 0; k < Unpacker::kLanes; ++k) {
          idx[k] = static_cast<std::int32_t>(Unpacker::SlotValue(j * Unpacker::kLanes + k) / gs);
        }
        lane_group_[j] = hn::Load(di, idx);
      }
    }
  }

  const std::uint8_t* data() const { return w_; }
  std::size_t row_bytes() const { return layout_.row_bytes; }

  // dst[u + s] = x[u + SlotValue(s)] for every unit u of a row of `in` values (0 past the row).
  void Stage(const float* HWY_RESTRICT x, float* HWY_RESTRICT dst) const {
    const auto in = static_cast<std::size_t>(layout_.in);
    for (std::size_t u = 0; u < in; u += kUnit) {
      for (std::size_t s = 0; s < kUnit; ++s) {
        const std::size_t v = u + Unpacker::SlotValue(s);
        dst[u + s] = v < in ? x[v] : 0.0f;
      }
    }
  }

  // Σ_i W[row][i]·x[i] for x staged (Stage); the bytes at `next` (the next row) are prefetched
  // at the rate this row is read. Inside a group the sums of (q − zero)·x run per vector and are
  // scaled once at the group's end. Groups of whole units (g32 and up) go first through
  // WholeGroups, a loop without the run bookkeeping; the rest through ForEachGroupRun.
  HWY_INLINE float Dot(std::size_t row, const float* HWY_RESTRICT xs, std::uintptr_t next) const {
    const D d;
    const std::uint8_t* w = w_ + row * layout_.row_bytes;
    const std::uint8_t* codes = w + layout_.codes_offset;
    next += layout_.codes_offset;
    V acc[kVectors];
    for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::Zero(d);
    if (layout_.asymmetric) {
      WholeGroups<true>(w, xs, next, acc);
    } else {
      WholeGroups<false>(w, xs, next, acc);
    }
    const std::size_t begin = whole_groups_ * static_cast<std::size_t>(layout_.group_size);
    ForEachGroupRun(w, begin, static_cast<std::size_t>(layout_.in), [&](std::size_t u, std::size_t end, std::int64_t g) {
      const V zero = hn::Set(d, Unpacker::kBias + static_cast<float>(layout_.zero(w, g)));
      V sum[kVectors];
      for (std::size_t j = 0; j < kVectors; ++j) sum[j] = hn::Zero(d);
      for (; u < end; u += kUnit) {
        hwy::Prefetch(reinterpret_cast<const char*>(next + u * kBits / 8));
        SumUnit(codes, xs, u, zero, sum);
      }
      const V scale = hn::Set(d, LoadF16(w + 2 * g));
      for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::MulAdd(sum[j], scale, acc[j]);
    }, [&](std::size_t u, const V (&wv)[kVectors]) {
      hwy::Prefetch(reinterpret_cast<const char*>(next + u * kBits / 8));
      for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::MulAdd(wv[j], hn::Load(d, xs + u + j * Unpacker::kLanes), acc[j]);
    });
    for (std::size_t j = 1; j < kVectors; ++j) acc[0] = hn::Add(acc[0], acc[j]);
    return hn::GetLane(hn::SumOfLanes(d, acc[0]));
  }

  // Calls fn(u, w) for the units u = begin, begin + kUnit, … < end of row `row` (begin a
  // multiple of kUnit), w[j] the weights of slots j·Lanes … (0 past the row length).
  template <class Fn>
  HWY_INLINE void ForEachUnit(std::size_t row, std::size_t begin, std::size_t end, Fn&& fn) const {
    const D d;
    const std::uint8_t* w = w_ + row * layout_.row_bytes;
    const std::uint8_t* codes = w + layout_.codes_offset;
    auto run = [&](std::size_t u, std::size_t run_end, std::int64_t g) {
      const V scale = hn::Set(d, LoadF16(w + 2 * g));
      const V zero = hn::Set(d, Unpacker::kBias + static_cast<float>(layout_.zero(w, g)));
      for (; u < run_end; u += kUnit) {
        V wv[kVectors];
        unpacker_.Unpack(codes + u * kBits / 8, wv);
        for (std::size_t j = 0; j < kVectors; ++j) wv[j] = hn::Mul(hn::Sub(wv[j], zero), scale);
        fn(u, wv);
      }
    };
    // Groups of whole units (as in Dot): one run per group without the run bookkeeping.
    const auto gs = static_cast<std::size_t>(layout_.group_size);
    const std::size_t whole_end = std::min(end, whole_groups_ * gs);
    std::size_t u = begin;
    for (std::size_t g = begin / gs; u < whole_end; ++g) {
      const std::size_t run_end = std::min((g + 1) * gs, whole_end);
      run(u, run_end, static_cast<std::int64_t>(g));
      u = run_end;
    }
    ForEachGroupRun(w, u, end, run, fn);
  }

 private:
  // sum[j] += (q − zero)·x over the slots of unit v (codes: the row's codes).
  HWY_INLINE void SumUnit(const std::uint8_t* HWY_RESTRICT codes, const float* HWY_RESTRICT xs, std::size_t v,
                          V zero, V (&sum)[kVectors]) const {
    const D d;
    V q[kVectors];
    unpacker_.Unpack(codes + v * kBits / 8, q);
    for (std::size_t j = 0; j < kVectors; ++j) {
      sum[j] = hn::MulAdd(hn::Sub(q[j], zero), hn::Load(d, xs + v + j * Unpacker::kLanes), sum[j]);
    }
  }

  // acc += the scaled sums of the row's first whole_groups_ groups (groups of whole units whose
  // loads stay inside the row), one group per iteration.
  template <bool kAsymmetric>
  HWY_INLINE void WholeGroups(const std::uint8_t* w, const float* HWY_RESTRICT xs, std::uintptr_t next,
                              V (&acc)[kVectors]) const {
    const D d;
    const auto gs = static_cast<std::size_t>(layout_.group_size);
    const std::uint8_t* codes = w + layout_.codes_offset;
    V zero = hn::Set(d, Unpacker::kBias + static_cast<float>(1 << (kBits - 1)));
    for (std::size_t g = 0; g < whole_groups_; ++g) {
      if constexpr (kAsymmetric) zero = hn::Set(d, Unpacker::kBias + static_cast<float>(w[2 * layout_.groups + g]));
      V sum[kVectors];
      for (std::size_t j = 0; j < kVectors; ++j) sum[j] = hn::Zero(d);
      for (std::size_t u = g * gs; u < (g + 1) * gs; u += kUnit) {
        hwy::Prefetch(reinterpret_cast<const char*>(next + u * kBits / 8));
        SumUnit(codes, xs, u, zero, sum);
      }
      const V scale = hn::Set(d, LoadF16(w + 2 * g));
      for (std::size_t j = 0; j < kVectors; ++j) acc[j] = hn::MulAdd(sum[j], scale, acc[j]);
    }
  }

  // Splits the units [begin, end) of a row into runs inside one group whose loads stay inside
  // the row (run(u, run_end, g)) and single other units (slow(u, w) with their weights
  // (MixedUnit): a unit that crosses a group boundary or the row end, or whose load would leave
  // the row).
  template <class Run, class Slow>
  HWY_INLINE void ForEachGroupRun(const std::uint8_t* w, std::size_t begin, std::size_t end, Run&& run, Slow&& slow) const {
    const auto gs = static_cast<std::size_t>(layout_.group_size), in = static_cast<std::size_t>(layout_.in);
    std::size_t u = begin, g = begin / gs;
    while (u < end) {
      while ((g + 1) * gs <= u) ++g;
      const std::size_t run_end = std::min({std::min((g + 1) * gs, in) / kUnit * kUnit, safe_units_end_, end});
      if (u < run_end) {
        run(u, run_end, static_cast<std::int64_t>(g));
        u = run_end;
        continue;
      }
      V wv[kVectors];
      MixedUnit(w, u, wv);
      slow(u, wv);
      u += kUnit;
    }
  }

  // The weights of a unit outside a single-group run. A unit of several whole groups
  // (unit_groups_ > 0: 2-bit units of 64 values with groups of 32, groups below 32) takes
  // per-lane scales and zero points from one vector of its groups; a unit inside one group and
  // inside the row whose load would leave the row (3-bit units read 16 bytes for 12) reads a
  // zero-padded copy of its codes and takes the group's scale and zero point. The rest (a unit
  // at the row end, groups that do not divide the unit) take SlowUnit.
  HWY_INLINE void MixedUnit(const std::uint8_t* w, std::size_t u, V (&wv)[kVectors]) const {
    if (unit_groups_ > 0 && u + kUnit <= safe_units_end_) {
      UnitOfGroups(w, u, wv);
      return;
    }
    const auto gs = static_cast<std::size_t>(layout_.group_size);
    const std::size_t g = u / gs;
    if (u + kUnit > static_cast<std::size_t>(layout_.in) || (u + kUnit - 1) / gs != g) {
      SlowUnit(w, u, wv);
      return;
    }
    const D d;
    alignas(16) std::uint8_t tail[Unpacker::kLoadBytes];
    unpacker_.Unpack(UnitBytes<kBits>(w + layout_.codes_offset, layout_.code_bytes(), u, tail), wv);
    const V scale = hn::Set(d, LoadF16(w + 2 * g));
    const V zero = hn::Set(d, Unpacker::kBias + static_cast<float>(layout_.zero(w, static_cast<std::int64_t>(g))));
    for (std::size_t j = 0; j < kVectors; ++j) wv[j] = hn::Mul(hn::Sub(wv[j], zero), scale);
  }

  // A unit of unit_groups_ whole groups whose load stays inside the row (see MixedUnit).
  HWY_INLINE void UnitOfGroups(const std::uint8_t* w, std::size_t u, V (&wv)[kVectors]) const {
    const D d;
    const std::size_t g0 = u / kUnit * unit_groups_;
    HWY_ALIGN float s[Unpacker::kLanes] = {}, z[Unpacker::kLanes] = {};
    for (std::size_t i = 0; i < unit_groups_; ++i) {
      s[i] = LoadF16(w + 2 * (g0 + i));
      z[i] = Unpacker::kBias + static_cast<float>(layout_.zero(w, static_cast<std::int64_t>(g0 + i)));
    }
    const V scales = hn::Load(d, s), zeros = hn::Load(d, z);
    unpacker_.Unpack(w + layout_.codes_offset + u * kBits / 8, wv);
    for (std::size_t j = 0; j < kVectors; ++j) {
      const auto lanes = hn::IndicesFromVec(d, lane_group_[j]);
      wv[j] = hn::Mul(hn::Sub(wv[j], hn::TableLookupLanes(zeros, lanes)), hn::TableLookupLanes(scales, lanes));
    }
  }

  // Codes from a zero-padded copy where needed, scales per lane (0 past the row).
  HWY_NOINLINE void SlowUnit(const std::uint8_t* w, std::size_t u, V (&wv)[kVectors]) const {
    const D d;
    alignas(16) std::uint8_t tail[Unpacker::kLoadBytes];
    unpacker_.Unpack(UnitBytes<kBits>(w + layout_.codes_offset, layout_.code_bytes(), u, tail), wv);
    HWY_ALIGN float s[Unpacker::kLanes], z[Unpacker::kLanes];
    for (std::size_t j = 0; j < kVectors; ++j) {
      for (std::size_t k = 0; k < Unpacker::kLanes; ++k) {
        const std::size_t v = u + Unpacker::SlotValue(j * Unpacker::kLanes + k);
        s[k] = 0.0f;
        z[k] = Unpacker::kBias;
        if (v >= static_cast<std::size_t>(layout_.in)) continue;
        const auto g = static_cast<std::int64_t>(v / static_cast<std::size_t>(layout_.group_size));
        s[k] = layout_.scale(w, g);
        z[k] += static_cast<float>(layout_.zero(w, g));
      }
      wv[j] = hn::Mul(hn::Sub(wv[j], hn::Load(d, z)), hn::Load(d, s));
    }
  }

  IntRowLayout layout_;
  const std::uint8_t* w_;
  Unpacker unpacker_;
  std::size_t safe_units_end_;
  std::size_t whole_groups_ = 0;                                // leading groups for WholeGroups
  std::size_t unit_groups_ = 0;                                 // groups per unit (see MixedUnit)
  hn::Vec<hn::RebindToSigned<D>> lane_group_[kVectors] = {};   // per lane: its group in the unit
};

// Unpacks units of `kBits`-bit codes to int16 lanes in value order: one vector of Lanes values
// (at most 32, so 16 bytes of codes below 8 bits: a byte shuffle + per-lane shift + mask;
// 8 bits: bytes widened). HWY_SCALAR: units of 8 values (whole bytes), one per 1-lane vector.
template <int kBits>
class IntCodeUnpacker16 {
 public:
  using D = hn::ScalableTag<std::int16_t>;
  using VI = hn::Vec<D>;
  static constexpr std::size_t kLanes = hn::MaxLanes(D());
  static constexpr std::size_t kUnit = kLanes < 8 ? 8 : kLanes;
  static constexpr std::size_t kVectors = kUnit / kLanes;
  static_assert(kUnit * kBits <= 16 * 8 || kBits == 8, "a unit's codes must fit a 128-bit block");
  static constexpr std::size_t kLoadBytes = kBits == 8 ? kUnit : 16;

  IntCodeUnpacker16() {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kBits < 8) ShuffleTables<kBits, !kNative16BitShifts>(hn::RebindToUnsigned<D>(), 0, index_, shift_);
#endif
  }

  // q[j] = the codes of values j·Lanes … of the unit whose codes start at p (kLoadBytes readable).
  HWY_INLINE void Unpack(const std::uint8_t* HWY_RESTRICT p, VI (&q)[kVectors]) const {
    const D d;
    const hn::RebindToUnsigned<D> du;
    if constexpr (kBits == 8) {
      for (std::size_t j = 0; j < kVectors; ++j) q[j] = hn::BitCast(d, hn::PromoteTo(du, hn::LoadU(hn::Rebind<std::uint8_t, D>(), p + j * kLanes)));
    } else {
#if HWY_TARGET == HWY_SCALAR
      for (std::size_t j = 0; j < kVectors; ++j) q[j] = hn::Set(d, static_cast<std::int16_t>(CodeAt<kBits, kLoadBytes>(p, j)));
#else
      const hn::Repartition<std::uint8_t, D> dbytes;
      const auto pair = hn::BitCast(du, hn::TableLookupBytes(hn::LoadDup128(dbytes, p), hn::BitCast(dbytes, index_)));
#if HWY_TARGET <= HWY_AVX3
      const auto low = hn::Shr(pair, shift_);
#else
      const auto low = hn::ShiftRight<8>(hn::Mul(pair, shift_));
#endif
      q[0] = hn::BitCast(d, hn::And(low, hn::Set(du, static_cast<std::uint16_t>((1u << kBits) - 1))));
#endif
    }
  }

 private:
  using VU = hn::Vec<hn::RebindToUnsigned<D>>;
  VU index_, shift_;  // byte shuffle and bit offset (or power-of-two factor) per lane
};

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

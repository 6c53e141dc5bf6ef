// Per-target SIMD decoding of kInt weight rows (layout in core/dtype.h) to f32 vectors: the
// row decoder of gemm_int's kernels (decoded_matmul-inl.h) and of gemm_int8_act's code unpacking.
//
// Codes are decoded kIntUnit (32) values at a time: 4·bits bytes, which start on a byte for
// every bit width (8 values = 3 bytes for 3 bits). Below 8 bits, the unit's bytes are
// broadcast to every 128-bit block; a byte shuffle puts the two bytes holding each value
// (value i: stream bits [i·bits, (i+1)·bits), LSB first) into its 32-bit lane, a per-lane shift
// and a mask extract it. 8-bit codes are widened directly. A weight is then
// scale·q − scale·zero in one multiply-add, which is exact: (q − zero)·scale has at most
// 8 + 11 significant bits (f16 scale), so the vectors hold exactly what dequantize_int_row
// computes.
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

#include <hwy/highway.h>

#include "kernels/cpu/int_row_layout.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Values decoded together (whole bytes for every bit width; <= 16 bytes below 8 bits).
constexpr std::size_t kIntUnit = 32;

// Unpacks units of kIntUnit `kBits`-bit codes to f32 vectors of exact small integers.
template <int kBits>
class IntCodeUnpacker {
 public:
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  static constexpr std::size_t kVectors = kIntUnit / hn::MaxLanes(D());
  static_assert(kVectors * hn::MaxLanes(D()) == kIntUnit, "f32 vectors must tile the unit");
  // Bytes a unit's load reads from its start: 16 (one 128-bit block) below 8 bits.
  static constexpr std::size_t kLoadBytes = kBits == 8 ? kIntUnit : 16;
  using VU = hn::Vec<hn::RebindToUnsigned<D>>;

  IntCodeUnpacker() {
    if constexpr (kBits < 8) {
      const hn::RebindToUnsigned<D> du;
      const std::size_t n = hn::Lanes(du);
      for (std::size_t j = 0; j < kVectors; ++j) {
        // Lane k holds value j·n + k: its first byte b0 in the lane's low byte, b0 + 1 above
        // (clamped to the block; a value never spans a byte boundary when that matters).
        const auto bit = hn::Mul(hn::Iota(du, static_cast<std::uint32_t>(j * n)), hn::Set(du, static_cast<std::uint32_t>(kBits)));
        const auto b0 = hn::ShiftRight<3>(bit);
        const auto b1 = hn::Min(hn::Add(b0, hn::Set(du, 1)), hn::Set(du, 15));
        index_[j] = hn::Or(b0, hn::Mul(b1, hn::Set(du, 0x01010100u)));
        shift_[j] = hn::And(bit, hn::Set(du, 7));
      }
    }
  }

  // The codes of values j·Lanes .. (j+1)·Lanes − 1 of the unit at p (kLoadBytes readable), as
  // u32 lanes (lanes[j]) or f32 (q[j]).
  HWY_INLINE void UnpackU32(const std::uint8_t* HWY_RESTRICT p, VU (&lanes)[kVectors]) const {
    const hn::RebindToUnsigned<D> du;
    if constexpr (kBits == 8) {
      const hn::Rebind<std::uint8_t, D> d8;
      for (std::size_t j = 0; j < kVectors; ++j) lanes[j] = hn::PromoteTo(du, hn::LoadU(d8, p + j * hn::Lanes(du)));
    } else {
      const hn::Repartition<std::uint8_t, D> d8;
      const auto bytes = hn::LoadDup128(d8, p);
      const auto mask = hn::Set(du, (1u << kBits) - 1);
      for (std::size_t j = 0; j < kVectors; ++j) {
        const auto pair = hn::BitCast(du, hn::TableLookupBytes(bytes, hn::BitCast(d8, index_[j])));
        lanes[j] = hn::And(hn::Shr(pair, shift_[j]), mask);
      }
    }
  }
  HWY_INLINE void Unpack(const std::uint8_t* HWY_RESTRICT p, V (&q)[kVectors]) const {
    const D d;
    const hn::RebindToSigned<D> di;
    VU lanes[kVectors];
    UnpackU32(p, lanes);
    for (std::size_t j = 0; j < kVectors; ++j) q[j] = hn::ConvertTo(d, hn::BitCast(di, lanes[j]));
  }

  // Where unit u (value u, a multiple of kIntUnit) of a row's `code_bytes` packed codes can be
  // read kLoadBytes at a time: in place, or for the row's last units (whose load would leave the
  // row, perhaps the tensor) from `tail`, a zero-padded copy.
  static HWY_INLINE const std::uint8_t* UnitBytes(const std::uint8_t* codes, std::size_t code_bytes, std::size_t u,
                                                  std::uint8_t (&tail)[kLoadBytes]) {
    const std::size_t byte = u * kBits / 8;
    if (byte + kLoadBytes <= code_bytes) return codes + byte;
    std::memset(tail, 0, sizeof tail);
    if (byte < code_bytes) std::memcpy(tail, codes + byte, std::min(code_bytes - byte, sizeof tail));
    return tail;
  }

 private:
  VU index_[kVectors];  // byte shuffle per 32-bit lane
  VU shift_[kVectors];  // bit offset of the value in its lane
};

// Decodes one kInt row unit by unit, in increasing order, to f32 weights (the RowDecoder of
// decoded_matmul-inl.h): tracks the current group's scale and scale·zero.
template <int kBits>
class IntRowDecoder {
 public:
  using Unpacker = IntCodeUnpacker<kBits>;
  using D = typename Unpacker::D;
  using V = typename Unpacker::V;
  static constexpr std::size_t kUnit = kIntUnit;
  static constexpr std::size_t kVectors = Unpacker::kVectors;

  IntRowDecoder(const IntRowLayout& layout, const std::uint8_t* w) : layout_(layout), w_(w) {}

  const std::uint8_t* data() const { return w_; }
  std::size_t row_bytes() const { return layout_.row_bytes; }

  // Starts row `row` at value `begin` (a multiple of kUnit).
  HWY_INLINE void Start(std::size_t row, std::size_t begin) {
    row_ = w_ + row * layout_.row_bytes;
    codes_ = row_ + layout_.codes_offset;
    SetGroup(begin / static_cast<std::size_t>(layout_.group_size));
  }

  // w[j] = weights of values u + j·Lanes .. of the current row (u a multiple of kUnit, units
  // in increasing order); lanes at or past the row length are 0.
  HWY_INLINE void Unit(std::size_t u, V (&w)[kVectors]) {
    const D d;
    const std::size_t n = hn::Lanes(d), in = static_cast<std::size_t>(layout_.in);
    alignas(16) std::uint8_t tail[Unpacker::kLoadBytes];
    const std::uint8_t* p = Unpacker::UnitBytes(codes_, layout_.code_bytes(), u, tail);
    V q[kVectors];
    unpacker_.Unpack(p, q);
    for (std::size_t j = 0; j < kVectors; ++j) {
      const std::size_t i = u + j * n;
      if (i >= in) {
        w[j] = hn::Zero(d);
        continue;
      }
      if (i >= group_end_) SetGroup(i / static_cast<std::size_t>(layout_.group_size));
      if (i + n <= group_end_) {
        w[j] = hn::MulAdd(q[j], scale_, bias_);
      } else {
        w[j] = MixedGroups(q[j], i);
      }
    }
  }

 private:
  HWY_INLINE void SetGroup(std::size_t g) {
    const auto gi = static_cast<std::int64_t>(g);
    const float s = layout_.scale(row_, gi);
    scale_ = hn::Set(D(), s);
    bias_ = hn::Set(D(), -static_cast<float>(layout_.zero(row_, gi)) * s);
    group_end_ = std::min((g + 1) * static_cast<std::size_t>(layout_.group_size), static_cast<std::size_t>(layout_.in));
  }

  // A vector that crosses a group boundary or the row end: per-lane scales (0 past the row).
  HWY_NOINLINE V MixedGroups(V q, std::size_t i) const {
    const D d;
    HWY_ALIGN float s[hn::MaxLanes(D())], b[hn::MaxLanes(D())];
    for (std::size_t k = 0; k < hn::Lanes(d); ++k) {
      const std::size_t v = i + k;
      s[k] = b[k] = 0.0f;
      if (v >= static_cast<std::size_t>(layout_.in)) continue;
      const auto g = static_cast<std::int64_t>(v / static_cast<std::size_t>(layout_.group_size));
      s[k] = layout_.scale(row_, g);
      b[k] = -static_cast<float>(layout_.zero(row_, g)) * s[k];
    }
    return hn::MulAdd(q, hn::Load(d, s), hn::Load(d, b));
  }

  IntRowLayout layout_;
  const std::uint8_t* w_;
  Unpacker unpacker_;
  const std::uint8_t* row_ = nullptr;
  const std::uint8_t* codes_ = nullptr;
  V scale_, bias_;
  std::size_t group_end_ = 0;
};

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle

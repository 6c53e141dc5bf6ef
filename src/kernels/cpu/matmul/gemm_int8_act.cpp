#include "peregrine/kernels/cpu/matmul/gemm_int8_act.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "kernels/cpu/matmul/int_row_layout.h"
#include "kernels/cpu/row_split.h"
#include "peregrine/kernels/cpu/matmul/token_quantize.h"
#include "peregrine/quant/int_group.h"

#ifndef PEREGRINE_KERNELS_CPU_GEMM_INT8_ACT_OPERANDS
#define PEREGRINE_KERNELS_CPU_GEMM_INT8_ACT_OPERANDS
namespace peregrine::gemm_int8_act_detail {

// Values per group in the padded int16 layouts are a multiple of this (AVX-512's int16 lanes).
constexpr std::size_t kGroupPad = 32;
// Output rows decoded and multiplied together (the thread-split granularity).
constexpr std::int64_t kTileRows = 4;

// Position of value i of a row in the padded layout (groups `group_stride` values apart).
inline std::size_t padded_index(const IntRowLayout& layout, std::size_t group_stride, std::int64_t i) {
  const std::int64_t g = i / layout.group_size;
  return static_cast<std::size_t>(g) * group_stride + static_cast<std::size_t>(i - g * layout.group_size);
}

// The operands of one gemm_int8_act call, shared by every target's kernel.
struct Operands {
  IntRowLayout layout;
  const std::uint8_t* w;          // [out] rows of layout.row_bytes
  std::size_t group_stride;       // padded values per group
  const std::int16_t* xq;         // [n_tokens, groups · group_stride] padded int8 activations
  const float* sx;                // [n_tokens] activation scales
  const float* x;                 // [n_tokens, in] f32 activations (for the outlier columns)
  const std::int64_t* outliers;   // ascending outlier columns
  std::size_t n_outliers;
  std::int64_t n_tokens, out;
  float* y;                       // [n_tokens, out]

  std::size_t padded(std::int64_t i) const { return padded_index(layout, group_stride, i); }
};

}  // namespace peregrine::gemm_int8_act_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul/gemm_int8_act.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/cpu/matmul/int_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_int8_act_detail::kTileRows;
using gemm_int8_act_detail::Operands;

// Whether every unit of a row lies inside one group (groups are whole units, or a row is one
// group): units then go to their group's place in the padded layout whole.
template <int kBits>
bool WholeUnitGroups(const Operands& op) {
  return op.layout.groups == 1 || op.layout.group_size % static_cast<std::int64_t>(IntCodeUnpacker16<kBits>::kUnit) == 0;
}

// For WholeUnitGroups rows: calls unit(k, q) for every unit of row `row`, q its values' q − zero
// (int16; past the row length don't-care values, which meet zero activations) and k its place in
// the padded layout, and group_end(g) after group g's units. The next row's codes are prefetched
// as these are read (the hardware prefetcher stops at 4 KiB pages).
template <int kBits, class Unit, class GroupEnd>
HWY_INLINE void ForEachWholeUnit(const Operands& op, const IntCodeUnpacker16<kBits>& unpacker, std::int64_t row,
                                 Unit&& unit, GroupEnd&& group_end) {
  using Unpacker = IntCodeUnpacker16<kBits>;
  const typename Unpacker::D d;
  const IntRowLayout& L = op.layout;
  const std::uint8_t* w = op.w + static_cast<std::size_t>(row) * L.row_bytes;
  const std::uint8_t* codes = w + L.codes_offset;
  const std::uintptr_t next_codes = reinterpret_cast<std::uintptr_t>(codes) + L.row_bytes;  // a hint only
  const auto gs = static_cast<std::size_t>(L.group_size), in = static_cast<std::size_t>(L.in);
  alignas(16) std::uint8_t tail[Unpacker::kLoadBytes];
  std::size_t g_begin = 0;
  for (std::int64_t g = 0; g < L.groups; ++g, g_begin += gs) {
    const auto zero = hn::Set(d, static_cast<std::int16_t>(L.zero(w, g)));
    const std::size_t place = static_cast<std::size_t>(g) * op.group_stride - g_begin;
    for (std::size_t u = g_begin; u < std::min(g_begin + gs, in); u += Unpacker::kUnit) {
      hwy::Prefetch(reinterpret_cast<const char*>(next_codes + u * kBits / 8));
      typename Unpacker::VI q[Unpacker::kVectors];
      unpacker.Unpack(UnitBytes<kBits>(codes, L.code_bytes(), u, tail), q);
      for (std::size_t j = 0; j < Unpacker::kVectors; ++j) unit(place + u + j * Unpacker::kLanes, hn::Sub(q[j], zero));
    }
    group_end(g);
  }
}

// dst (padded layout) = q − zero of every value of row `row` (int16).
template <int kBits>
void DecodeRowInt16(const Operands& op, const IntCodeUnpacker16<kBits>& unpacker, std::int64_t row,
                    std::int16_t* HWY_RESTRICT dst) {
  using Unpacker = IntCodeUnpacker16<kBits>;
  const typename Unpacker::D d;
  if (WholeUnitGroups<kBits>(op)) {
    ForEachWholeUnit(op, unpacker, row, [&](std::size_t k, hn::Vec<decltype(d)> q) { hn::StoreU(q, d, dst + k); },
                     [](std::int64_t) {});
    return;
  }
  const IntRowLayout& L = op.layout;
  const std::uint8_t* w = op.w + static_cast<std::size_t>(row) * L.row_bytes;
  const auto in = static_cast<std::size_t>(L.in);
  alignas(16) std::uint8_t tail[Unpacker::kLoadBytes];
  HWY_ALIGN std::int16_t q[Unpacker::kUnit];
  for (std::size_t u = 0; u < in; u += Unpacker::kUnit) {
    typename Unpacker::VI qv[Unpacker::kVectors];
    unpacker.Unpack(UnitBytes<kBits>(w + L.codes_offset, L.code_bytes(), u, tail), qv);
    for (std::size_t j = 0; j < Unpacker::kVectors; ++j) hn::Store(qv[j], d, q + j * Unpacker::kLanes);
    for (std::size_t i = u; i < std::min(u + Unpacker::kUnit, in); ++i) {
      const auto v = static_cast<std::int64_t>(i);
      dst[op.padded(v)] = static_cast<std::int16_t>(q[i - u] - L.zero(w, v / L.group_size));
    }
  }
}

// One token, no outlier columns, WholeUnitGroups: y[0, row] with each unit decoded in registers
// and multiplied at once (the decode GEMV streams the weights once).
template <int kBits>
void DotRowFused(const Operands& op, const IntCodeUnpacker16<kBits>& unpacker, std::int64_t row) {
  const hn::ScalableTag<std::int16_t> d16;
  const hn::RepartitionToWide<decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const std::uint8_t* w = op.w + static_cast<std::size_t>(row) * op.layout.row_bytes;
  auto acc = hn::Zero(df);
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  ForEachWholeUnit(op, unpacker, row, [&](std::size_t k, hn::Vec<decltype(d16)> q) {
    sum0 = hn::ReorderWidenMulAccumulate(d32, q, hn::LoadU(d16, op.xq + k), sum0, sum1);
  }, [&](std::int64_t g) {
    acc = hn::MulAdd(hn::ConvertTo(df, hn::Add(sum0, sum1)), hn::Set(df, LoadF16(w + 2 * g)), acc);
    sum0 = sum1 = hn::Zero(d32);
  });
  op.y[row] = op.sx[0] * hn::GetLane(hn::SumOfLanes(df, acc));
}

// y[t, row + r] for r < kRows, every token: the rows' int16 values `wq` (padded layout, rows
// `ld` apart) and group scales `scale` ([kRows, groups]) against each token's activations.
template <std::size_t kRows>
void DotRows(const Operands& op, const std::int16_t* HWY_RESTRICT wq, std::size_t ld,
             const float* HWY_RESTRICT scale, std::int64_t row) {
  const hn::ScalableTag<std::int16_t> d16;
  const hn::RepartitionToWide<decltype(d16)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const std::size_t n16 = hn::Lanes(d16), gstride = op.group_stride;
  const auto groups = static_cast<std::size_t>(op.layout.groups);
  for (std::int64_t t = 0; t < op.n_tokens; ++t) {
    const std::int16_t* xt = op.xq + static_cast<std::size_t>(t) * groups * gstride;
    hn::Vec<decltype(df)> acc[kRows];
    for (std::size_t r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    for (std::size_t g = 0; g < groups; ++g) {
      hn::Vec<decltype(d32)> sum0[kRows], sum1[kRows];
      for (std::size_t r = 0; r < kRows; ++r) sum0[r] = sum1[r] = hn::Zero(d32);
      for (std::size_t k = g * gstride; k < (g + 1) * gstride; k += n16) {
        const auto xv = hn::LoadU(d16, xt + k);
        for (std::size_t r = 0; r < kRows; ++r) {
          sum0[r] = hn::ReorderWidenMulAccumulate(d32, hn::LoadU(d16, wq + r * ld + k), xv, sum0[r], sum1[r]);
        }
      }
      for (std::size_t r = 0; r < kRows; ++r) {
        const auto dot = hn::ConvertTo(df, hn::Add(sum0[r], sum1[r]));
        acc[r] = hn::MulAdd(dot, hn::Set(df, scale[r * groups + g]), acc[r]);
      }
    }
    for (std::size_t r = 0; r < kRows; ++r) {
      // LLM.int8(): the outlier columns in f32 against the dequantized weights.
      float outlier_sum = 0.0f;
      for (std::size_t k = 0; k < op.n_outliers; ++k) {
        const std::int64_t c = op.outliers[k];
        const float wc = scale[r * groups + static_cast<std::size_t>(c / op.layout.group_size)] *
                         static_cast<float>(wq[r * ld + op.padded(c)]);
        outlier_sum += wc * op.x[t * op.layout.in + c];
      }
      op.y[t * op.out + row + static_cast<std::int64_t>(r)] = op.sx[t] * hn::GetLane(hn::SumOfLanes(df, acc[r])) + outlier_sum;
    }
  }
}

// Several tokens (or outlier columns, or groups that are not whole units): blocks of kTileRows
// rows decoded once into a per-thread buffer, then multiplied with every token.
template <int kBits>
void DecodedBlockRows(const Operands& op, const IntCodeUnpacker16<kBits>& unpacker, std::int64_t row_begin,
                      std::int64_t row_end) {
  const auto groups = static_cast<std::size_t>(op.layout.groups);
  const std::size_t ld = groups * op.group_stride;
  thread_local hwy::AlignedFreeUniquePtr<std::int16_t[]> wq;
  thread_local std::size_t capacity = 0;
  thread_local std::vector<float> scale;
  if (kTileRows * ld > capacity) {
    capacity = static_cast<std::size_t>(kTileRows) * ld;
    wq = hwy::AllocateAligned<std::int16_t>(capacity);
  }
  std::fill(wq.get(), wq.get() + kTileRows * ld, std::int16_t{0});  // padding meets zero activations
  scale.resize(static_cast<std::size_t>(kTileRows) * groups);
  for (std::int64_t row = row_begin; row < row_end; row += kTileRows) {
    const std::int64_t rows = std::min(kTileRows, row_end - row);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* w = op.w + static_cast<std::size_t>(row + r) * op.layout.row_bytes;
      DecodeRowInt16(op, unpacker, row + r, wq.get() + static_cast<std::size_t>(r) * ld);
      for (std::size_t g = 0; g < groups; ++g) {
        scale[static_cast<std::size_t>(r) * groups + g] = op.layout.scale(w, static_cast<std::int64_t>(g));
      }
    }
    if (rows == kTileRows) {
      DotRows<kTileRows>(op, wq.get(), ld, scale.data(), row);
    } else {
      for (std::int64_t r = 0; r < rows; ++r) {
        DotRows<1>(op, wq.get() + static_cast<std::size_t>(r) * ld, ld, scale.data() + static_cast<std::size_t>(r) * groups, row + r);
      }
    }
  }
}

template <int kBits>
void Int8ActRowsBits(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const IntCodeUnpacker16<kBits> unpacker;
  if (op.n_tokens == 1 && op.n_outliers == 0 && WholeUnitGroups<kBits>(op)) {
    for (std::int64_t row = row_begin; row < row_end; ++row) DotRowFused(op, unpacker, row);
  } else {
    DecodedBlockRows(op, unpacker, row_begin, row_end);
  }
}

void Int8ActRows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  switch (op.layout.bits) {
    case 2: return Int8ActRowsBits<2>(op, row_begin, row_end);
    case 3: return Int8ActRowsBits<3>(op, row_begin, row_end);
    case 4: return Int8ActRowsBits<4>(op, row_begin, row_end);
    default: return Int8ActRowsBits<8>(op, row_begin, row_end);
  }
}

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
namespace {

using gemm_int8_act_detail::kGroupPad;

HWY_EXPORT(Int8ActRows);

std::size_t group_stride(const IntRowLayout& layout) {
  const auto values = static_cast<std::size_t>(std::min(layout.group_size, layout.in));
  return (values + kGroupPad - 1) / kGroupPad * kGroupPad;
}

}  // namespace

void gemm_int8_act(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                   std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  const IntRowLayout layout(w);
  thread_local TokenQuantizedActivations xq;
  quantize_tokens(x, n_tokens, layout.in, w.quant.outlier_threshold, xq);
  // The activations in the padded int16 layout, zero between groups.
  const std::size_t gstride = group_stride(layout), padded_in = static_cast<std::size_t>(layout.groups) * gstride;
  thread_local hwy::AlignedFreeUniquePtr<std::int16_t[]> xp;
  thread_local std::size_t capacity = 0;
  if (static_cast<std::size_t>(n_tokens) * padded_in > capacity) {
    capacity = static_cast<std::size_t>(n_tokens) * padded_in;
    xp = hwy::AllocateAligned<std::int16_t>(capacity);
  }
  std::fill(xp.get(), xp.get() + static_cast<std::size_t>(n_tokens) * padded_in, std::int16_t{0});
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t i = 0; i < layout.in; ++i) {
      xp[static_cast<std::size_t>(t) * padded_in + gemm_int8_act_detail::padded_index(layout, gstride, i)] = xq.q[static_cast<std::size_t>(t * layout.in + i)];
    }
  }
  const gemm_int8_act_detail::Operands op{layout, static_cast<const std::uint8_t*>(w.data), gstride,
                                          xp.get(), xq.scale.data(), x.data(), xq.outliers.data(),
                                          xq.outliers.size(), n_tokens, w.n_rows(), y.data()};
  split_rows(op.out, layout.in * n_tokens, gemm_int8_act_detail::kTileRows, pool, min_parallel_macs,
             [&](std::int64_t begin, std::int64_t end) { HWY_DYNAMIC_DISPATCH(Int8ActRows)(op, begin, end); });
}

void gemm_int8_act_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                             std::span<float> y) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const std::size_t rb = *w.row_bytes();
  TokenQuantizedActivations xq;
  quantize_tokens_reference(x, n_tokens, in, w.quant.outlier_threshold, xq);
  for (std::int64_t o = 0; o < out; ++o) {
    const IntRow row = unpack_int_row(w.quant, static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(o) * rb, in);
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const std::int8_t* q = xq.q.data() + t * in;
      double int8_part = 0.0;
      for (std::size_t g = 0; g < row.groups.size(); ++g) {
        const std::int64_t begin = static_cast<std::int64_t>(g) * w.quant.group_size;
        const std::int64_t end = std::min(in, begin + w.quant.group_size);
        std::int64_t dot = 0, sum = 0;
        for (std::int64_t i = begin; i < end; ++i) {
          dot += std::int64_t{row.codes[static_cast<std::size_t>(i)]} * q[i];
          sum += q[i];
        }
        int8_part += static_cast<double>(row.groups[g].scale) * static_cast<double>(dot - row.groups[g].zero * sum);
      }
      double outlier_part = 0.0;
      for (std::int64_t c : xq.outliers) {
        const GroupScale& g = row.groups[static_cast<std::size_t>(c / w.quant.group_size)];
        outlier_part += static_cast<double>(dequantize_code(row.codes[static_cast<std::size_t>(c)], g)) * x[static_cast<std::size_t>(t * in + c)];
      }
      y[static_cast<std::size_t>(t * out + o)] =
          static_cast<float>(static_cast<double>(xq.scale[static_cast<std::size_t>(t)]) * int8_part + outlier_part);
    }
  }
}

}  // namespace peregrine
#endif  // HWY_ONCE

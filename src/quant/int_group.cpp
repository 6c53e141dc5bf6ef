#include "peregrine/quant/int_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

int max_code(int bits) { return (1 << bits) - 1; }

float round_to_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

std::size_t header_bytes(const QuantParams& p, std::int64_t groups) {
  return static_cast<std::size_t>(groups) * (p.asymmetric ? 3 : 2);
}

void pack_codes(const std::vector<std::uint8_t>& codes, int bits, std::uint8_t* dst) {
  const std::size_t n_bytes = (codes.size() * static_cast<std::size_t>(bits) + 7) / 8;
  std::memset(dst, 0, n_bytes);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::size_t bit = i * static_cast<std::size_t>(bits);
    const unsigned v = static_cast<unsigned>(codes[i]) << (bit % 8);
    dst[bit / 8] = static_cast<std::uint8_t>(dst[bit / 8] | (v & 0xff));
    if ((bit % 8) + static_cast<std::size_t>(bits) > 8) dst[bit / 8 + 1] = static_cast<std::uint8_t>(dst[bit / 8 + 1] | (v >> 8));
  }
}

std::uint8_t unpack_code(const std::uint8_t* src, std::int64_t i, int bits) {
  const std::size_t bit = static_cast<std::size_t>(i) * static_cast<std::size_t>(bits);
  unsigned v = src[bit / 8];
  if ((bit % 8) + static_cast<std::size_t>(bits) > 8) v |= static_cast<unsigned>(src[bit / 8 + 1]) << 8;
  return static_cast<std::uint8_t>((v >> (bit % 8)) & static_cast<unsigned>(max_code(bits)));
}

GroupScale range_scale(float lo, float hi, int bits, bool asymmetric) {
  if (!asymmetric) {
    const float amax = std::max(std::fabs(lo), std::fabs(hi));
    return {round_to_f16(amax / static_cast<float>((1 << (bits - 1)) - 1)), 1 << (bits - 1)};
  }
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  const float scale = round_to_f16((hi - lo) / static_cast<float>(max_code(bits)));
  if (scale == 0.0f) return {0.0f, 0};
  const int zero = static_cast<int>(std::lround(-lo / scale));
  return {scale, std::clamp(zero, 0, max_code(bits))};
}

}  // namespace

std::int64_t int_group_count(const QuantParams& p, std::int64_t n) {
  return (n + p.group_size - 1) / p.group_size;
}

GroupScale rtn_group_scale(std::span<const float> values, int bits, bool asymmetric, float clip) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return range_scale(*lo * clip, *hi * clip, bits, asymmetric);
}

int quantize_code(float x, const GroupScale& g, int bits) {
  if (g.scale == 0.0f) return g.zero;
  // Clamped as a float: x / scale can exceed any integer type (lround's result is then unspecified).
  const float q = std::round(x / g.scale) + static_cast<float>(g.zero);
  return static_cast<int>(std::clamp(q, 0.0f, static_cast<float>(max_code(bits))));
}

void pack_int_row(const QuantParams& p, const IntRow& row, std::uint8_t* dst) {
  const auto groups = static_cast<std::int64_t>(row.groups.size());
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::uint16_t s = f32_to_f16(row.groups[static_cast<std::size_t>(g)].scale);
    std::memcpy(dst + 2 * g, &s, sizeof s);
    if (p.asymmetric) dst[2 * groups + g] = static_cast<std::uint8_t>(row.groups[static_cast<std::size_t>(g)].zero);
  }
  pack_codes(row.codes, p.bits, dst + header_bytes(p, groups));
}

IntRow unpack_int_row(const QuantParams& p, const std::uint8_t* src, std::int64_t n) {
  const std::int64_t groups = int_group_count(p, n);
  IntRow row;
  row.groups.resize(static_cast<std::size_t>(groups));
  for (std::int64_t g = 0; g < groups; ++g) {
    std::uint16_t s;
    std::memcpy(&s, src + 2 * g, sizeof s);
    row.groups[static_cast<std::size_t>(g)] = {f16_to_f32(s), p.asymmetric ? src[2 * groups + g] : 1 << (p.bits - 1)};
  }
  const std::uint8_t* codes = src + header_bytes(p, groups);
  row.codes.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) row.codes[static_cast<std::size_t>(i)] = unpack_code(codes, i, p.bits);
  return row;
}

void dequantize_int_row(const QuantParams& p, const std::uint8_t* src, std::span<float> out) {
  const auto n = static_cast<std::int64_t>(out.size());
  const IntRow row = unpack_int_row(p, src, n);
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] =
        dequantize_code(row.codes[static_cast<std::size_t>(i)], row.groups[static_cast<std::size_t>(i / p.group_size)]);
  }
}

std::vector<std::uint8_t> quantize_int_rtn(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                           const QuantParams& p, bool per_tensor) {
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(cols));
  std::vector<std::uint8_t> out(rb * static_cast<std::size_t>(rows));
  const GroupScale tensor_scale = per_tensor ? rtn_group_scale(w, p.bits, p.asymmetric) : GroupScale{};
  IntRow row;
  row.codes.resize(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::span<const float> x = w.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols));
    row.groups.assign(static_cast<std::size_t>(int_group_count(p, cols)), tensor_scale);
    for (std::size_t g = 0; g < row.groups.size(); ++g) {
      const std::size_t begin = g * static_cast<std::size_t>(p.group_size);
      const std::size_t len = std::min(static_cast<std::size_t>(p.group_size), x.size() - begin);
      if (!per_tensor) row.groups[g] = rtn_group_scale(x.subspan(begin, len), p.bits, p.asymmetric);
      for (std::size_t i = begin; i < begin + len; ++i) row.codes[i] = static_cast<std::uint8_t>(quantize_code(x[i], row.groups[g], p.bits));
    }
    pack_int_row(p, row, out.data() + rb * static_cast<std::size_t>(r));
  }
  return out;
}

}  // namespace peregrine

#include "peregrine/quant/nf4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace peregrine {

// bitsandbytes functional.py get_4bit_type("nf4") (QLoRA Appendix E).
const std::array<float, 16> kNf4Codebook = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

namespace {

std::array<float, 256> make_absmax_map() {
  // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): no "additional items".
  std::vector<double> data;
  for (int i = 0; i < 7; ++i) {
    const int n = (1 << i) + 1;  // linspace(0.1, 1, n)
    const double scale = std::pow(10.0, -6 + i);
    for (int k = 0; k + 1 < n; ++k) {
      const double lo = 0.1 + 0.9 * k / (n - 1), hi = 0.1 + 0.9 * (k + 1) / (n - 1);
      data.push_back(scale * (lo + hi) / 2.0);
      data.push_back(-scale * (lo + hi) / 2.0);
    }
  }
  data.push_back(0.0);
  data.push_back(1.0);
  std::sort(data.begin(), data.end());
  std::array<float, 256> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data[i]);
  return out;
}

// Index of the value of the ascending `table` nearest to x (the lower one on a tie).
template <std::size_t N>
std::uint8_t nearest(const std::array<float, N>& table, float x) {
  const auto it = std::lower_bound(table.begin(), table.end(), x);
  if (it == table.begin()) return 0;
  if (it == table.end()) return static_cast<std::uint8_t>(N - 1);
  const auto hi = static_cast<std::size_t>(it - table.begin());
  return static_cast<std::uint8_t>(x - table[hi - 1] <= table[hi] - x ? hi - 1 : hi);
}

}  // namespace

const std::array<float, 256>& nf4_absmax_map() {
  static const std::array<float, 256> map = make_absmax_map();
  return map;
}

double Nf4Tensor::bits_per_weight() const {
  if (numel == 0) return 0.0;
  const double bits = 8.0 * static_cast<double>(codes.size() + absmax_codes.size()) + 32.0 * static_cast<double>(group_absmax.size() + 1);
  return bits / static_cast<double>(numel);
}

Expected<Nf4Tensor> nf4_quantize(std::span<const float> values, std::vector<std::int64_t> shape) {
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  if (shape.empty() || numel < 1 || static_cast<std::int64_t>(values.size()) != numel) {
    return invalid_argument("nf4_quantize: " + std::to_string(values.size()) + " values for a tensor of " + std::to_string(numel) +
                            " (an empty tensor or a size that is not its shape's)");
  }
  Nf4Tensor t;
  t.shape = std::move(shape);
  t.numel = numel;
  const std::int64_t blocks = t.n_blocks();
  std::vector<float> absmax(static_cast<std::size_t>(blocks), 0.0f);
  t.codes.assign(static_cast<std::size_t>((numel + 1) / 2), 0);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kNf4BlockSize, end = std::min(numel, begin + kNf4BlockSize);
    float m = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) {
      const float v = values[static_cast<std::size_t>(i)];
      if (!std::isfinite(v)) return invalid_argument("nf4_quantize: value " + std::to_string(i) + " is not finite");
      m = std::max(m, std::fabs(v));
    }
    absmax[static_cast<std::size_t>(b)] = m;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint8_t code = m > 0.0f ? nearest(kNf4Codebook, values[static_cast<std::size_t>(i)] / m) : std::uint8_t{7};
      t.codes[static_cast<std::size_t>(i / 2)] |= static_cast<std::uint8_t>(i % 2 == 0 ? code << 4 : code);
    }
  }
  // Double quantization (bitsandbytes quantize_4bit, compress_statistics): absmax − mean in
  // blocks of 256 through the dynamic map.
  double sum = 0.0;
  for (float a : absmax) sum += a;
  t.absmax_mean = static_cast<float>(sum / static_cast<double>(blocks));
  const std::int64_t groups = (blocks + kNf4AbsmaxGroup - 1) / kNf4AbsmaxGroup;
  t.group_absmax.assign(static_cast<std::size_t>(groups), 0.0f);
  t.absmax_codes.assign(static_cast<std::size_t>(blocks), 0);
  const auto& map = nf4_absmax_map();
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t begin = g * kNf4AbsmaxGroup, end = std::min(blocks, begin + kNf4AbsmaxGroup);
    float m = 0.0f;
    for (std::int64_t b = begin; b < end; ++b) m = std::max(m, std::fabs(absmax[static_cast<std::size_t>(b)] - t.absmax_mean));
    t.group_absmax[static_cast<std::size_t>(g)] = m;
    for (std::int64_t b = begin; b < end; ++b) {
      const float centered = absmax[static_cast<std::size_t>(b)] - t.absmax_mean;
      t.absmax_codes[static_cast<std::size_t>(b)] = m > 0.0f ? nearest(map, centered / m) : nearest(map, 0.0f);
    }
  }
  return t;
}

std::vector<float> nf4_block_absmax(const Nf4Tensor& t) {
  const auto& map = nf4_absmax_map();
  std::vector<float> out(t.absmax_codes.size());
  for (std::size_t b = 0; b < out.size(); ++b) {
    out[b] = map[t.absmax_codes[b]] * t.group_absmax[b / static_cast<std::size_t>(kNf4AbsmaxGroup)] + t.absmax_mean;
  }
  return out;
}

std::vector<float> nf4_dequantize(const Nf4Tensor& t) {
  const std::vector<float> absmax = nf4_block_absmax(t);
  std::vector<float> out(static_cast<std::size_t>(t.numel));
  for (std::int64_t i = 0; i < t.numel; ++i) {
    const std::uint8_t byte = t.codes[static_cast<std::size_t>(i / 2)];
    const std::uint8_t code = i % 2 == 0 ? byte >> 4 : byte & 0x0f;
    out[static_cast<std::size_t>(i)] = kNf4Codebook[code] * absmax[static_cast<std::size_t>(i / kNf4BlockSize)];
  }
  return out;
}

void nf4_encode_row(std::span<const float> row, std::uint8_t* dst) {
  const auto n = static_cast<std::int64_t>(row.size());
  auto t = nf4_quantize(row, {n});
  const std::int64_t blocks = n / kNf4BlockSize, groups = (blocks + kNf4AbsmaxGroup - 1) / kNf4AbsmaxGroup;
  if (!t) {  // a value that is not finite: the whole row decodes to NaN
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(dst, &nan, 4);
    std::memset(dst + 4, 0, static_cast<std::size_t>(4 * groups + blocks + n / 2));
    return;
  }
  std::memcpy(dst, &t->absmax_mean, 4);
  std::memcpy(dst + 4, t->group_absmax.data(), static_cast<std::size_t>(4 * groups));
  std::memcpy(dst + 4 + 4 * groups, t->absmax_codes.data(), static_cast<std::size_t>(blocks));
  std::memcpy(dst + 4 + 4 * groups + blocks, t->codes.data(), static_cast<std::size_t>(n / 2));
}

void nf4_decode_row(const std::uint8_t* src, std::span<float> out) {
  const auto n = static_cast<std::int64_t>(out.size());
  const std::int64_t blocks = n / kNf4BlockSize, groups = (blocks + kNf4AbsmaxGroup - 1) / kNf4AbsmaxGroup;
  float mean = 0.0f;
  std::memcpy(&mean, src, 4);
  const std::uint8_t* absmax_codes = src + 4 + 4 * groups;
  const std::uint8_t* codes = absmax_codes + blocks;
  const auto& map = nf4_absmax_map();
  for (std::int64_t b = 0; b < blocks; ++b) {
    float group = 0.0f;
    std::memcpy(&group, src + 4 + 4 * (b / kNf4AbsmaxGroup), 4);
    const float absmax = map[absmax_codes[b]] * group + mean;
    float* o = out.data() + b * kNf4BlockSize;
    const std::uint8_t* c = codes + b * kNf4BlockSize / 2;
    for (std::int64_t j = 0; j < kNf4BlockSize / 2; ++j) {
      o[2 * j] = kNf4Codebook[c[j] >> 4] * absmax;
      o[2 * j + 1] = kNf4Codebook[c[j] & 0x0f] * absmax;
    }
  }
}

}  // namespace peregrine

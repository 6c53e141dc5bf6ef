#include "peregrine/core/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace peregrine {

bool QuantParams::valid() const {
  const bool bits_ok = bits == 2 || bits == 3 || bits == 4 || bits == 8;
  const bool act_ok = act_bits == 8 || act_bits == 16;
  const bool outlier_ok = outlier_threshold == 0.0f || (outlier_threshold > 0.0f && act_bits == 8);
  return bits_ok && group_size >= 1 && act_ok && outlier_ok;
}

std::size_t dtype_block_size(DType t) {
  return (t == DType::kQ8_0 || t == DType::kQ4_0) ? 32 : 1;
}

std::size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 34;
    case DType::kQ4_0: return 18;
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return 1;
    case DType::kInt: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kI8: return "i8";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kF8E5M2: return "f8_e5m2";
    case DType::kInt: return "int";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kI8,
                  DType::kF8E4M3, DType::kF8E5M2, DType::kInt}) {
    if (dtype_name(t) == lower) return t;
  }
  return std::nullopt;
}

std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n) {
  if (t == DType::kInt) return std::nullopt;
  const std::size_t bs = dtype_block_size(t);
  if (n % bs != 0) return std::nullopt;
  const std::size_t header = (t == DType::kI8 || t == DType::kF8E4M3 || t == DType::kF8E5M2) ? kRowScaleBytes : 0;
  return header + static_cast<std::size_t>(n / bs) * dtype_block_bytes(t);
}

std::optional<std::size_t> row_bytes(DType t, const QuantParams& p, std::uint64_t n) {
  if (t != DType::kInt) return dtype_row_bytes(t, n);
  if (!p.valid()) return std::nullopt;
  const std::uint64_t groups = (n + static_cast<std::uint64_t>(p.group_size) - 1) / static_cast<std::uint64_t>(p.group_size);
  const std::uint64_t codes = (n * static_cast<std::uint64_t>(p.bits) + 7) / 8;
  return static_cast<std::size_t>(groups * (p.asymmetric ? 3 : 2) + codes);
}

}  // namespace peregrine

#include "peregrine/core/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace peregrine {

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
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    if (dtype_name(t) == lower) return t;
  }
  return std::nullopt;
}

std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n) {
  const std::size_t bs = dtype_block_size(t);
  if (n % bs != 0) return std::nullopt;
  return static_cast<std::size_t>(n / bs) * dtype_block_bytes(t);
}

}  // namespace peregrine

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

namespace {

constexpr DType kAllDTypes[] = {DType::kF32,    DType::kF16,    DType::kBF16,  DType::kQ8_0,  DType::kQ4_0,
                                DType::kI8,     DType::kF8E4M3, DType::kF8E5M2, DType::kInt,  DType::kQ4_1,
                                DType::kQ5_0,   DType::kQ5_1,   DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                                DType::kQ4_K,   DType::kQ5_K,   DType::kQ6_K,  DType::kIQ4_XS,
                                DType::kF16_S24, DType::kBF16_S24, DType::kQ8_0_S24, DType::kQ4_0_S24,
                                DType::kF16_S48, DType::kBF16_S48, DType::kQ8_0_S48, DType::kQ4_0_S48,
                                DType::kNF4};

}  // namespace

std::optional<SparseNmFormat> sparse_nm_format(DType t) {
  switch (t) {
    case DType::kF16_S24: return SparseNmFormat{2, 4, DType::kF16};
    case DType::kBF16_S24: return SparseNmFormat{2, 4, DType::kBF16};
    case DType::kQ8_0_S24: return SparseNmFormat{2, 4, DType::kQ8_0};
    case DType::kQ4_0_S24: return SparseNmFormat{2, 4, DType::kQ4_0};
    case DType::kF16_S48: return SparseNmFormat{4, 8, DType::kF16};
    case DType::kBF16_S48: return SparseNmFormat{4, 8, DType::kBF16};
    case DType::kQ8_0_S48: return SparseNmFormat{4, 8, DType::kQ8_0};
    case DType::kQ4_0_S48: return SparseNmFormat{4, 8, DType::kQ4_0};
    default: return std::nullopt;
  }
}

bool is_ggml_block_dtype(DType t) { return dtype_block_size(t) > 1; }

std::size_t dtype_block_size(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL: return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return 256;
    default: return 1;
  }
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
    case DType::kQ4_1: return 20;
    case DType::kQ5_0: return 22;
    case DType::kQ5_1: return 24;
    case DType::kIQ4_NL: return 18;
    case DType::kQ2_K: return 84;
    case DType::kQ3_K: return 110;
    case DType::kQ4_K: return 144;
    case DType::kQ5_K: return 176;
    case DType::kQ6_K: return 210;
    case DType::kIQ4_XS: return 136;
    case DType::kF16_S24:
    case DType::kBF16_S24:
    case DType::kQ8_0_S24:
    case DType::kQ4_0_S24:
    case DType::kF16_S48:
    case DType::kBF16_S48:
    case DType::kQ8_0_S48:
    case DType::kQ4_0_S48:
    case DType::kNF4: return 0;
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
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kF16_S24: return "f16_s24";
    case DType::kBF16_S24: return "bf16_s24";
    case DType::kQ8_0_S24: return "q8_0_s24";
    case DType::kQ4_0_S24: return "q4_0_s24";
    case DType::kF16_S48: return "f16_s48";
    case DType::kBF16_S48: return "bf16_s48";
    case DType::kQ8_0_S48: return "q8_0_s48";
    case DType::kQ4_0_S48: return "q4_0_s48";
    case DType::kNF4: return "nf4";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == lower) return t;
  }
  return std::nullopt;
}

std::optional<std::size_t> nf4_row_bytes(std::uint64_t n) {
  constexpr std::uint64_t kBlock = 64, kGroup = 256;
  if (n == 0 || n % kBlock != 0) return std::nullopt;
  const std::uint64_t blocks = n / kBlock, groups = (blocks + kGroup - 1) / kGroup;
  return static_cast<std::size_t>(4 + 4 * groups + blocks + n / 2);
}

std::optional<std::size_t> dtype_row_bytes(DType t, std::uint64_t n) {
  if (t == DType::kInt) return std::nullopt;
  if (const auto sparse = sparse_nm_format(t)) {
    const auto m = static_cast<std::uint64_t>(sparse->m);
    if (n % m != 0) return std::nullopt;
    const auto kept = dtype_row_bytes(sparse->kept, n / m * static_cast<std::uint64_t>(sparse->n));
    if (!kept) return std::nullopt;
    return *kept + static_cast<std::size_t>((n + 7) / 8);
  }
  if (t == DType::kNF4) return nf4_row_bytes(n);
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

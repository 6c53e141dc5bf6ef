// The group-wise integer weight format (DType::kInt, layout in core/dtype.h): round-to-nearest
// (RTN) group parameters, code packing, and row encode/decode. Shared by RTN, GPTQ, AWQ,
// SmoothQuant and LLM.int8() (which differ in how they choose the values fed here), by the
// kernels' scalar twins and by the file readers/writers.
//
// Spec: seed 004 (absmax and zero-point quantization); Frantar et al. 2023 (GPTQ) and Lin et al.
// 2024 (AWQ) for the group-wise granularity and the scale/zero conventions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// Scale and zero point of one group: x ≈ scale * (q - zero), q an unsigned `bits`-bit code.
struct GroupScale {
  float scale = 0.0f;  // >= 0, exactly representable as f16 (what the file stores)
  int zero = 0;        // in [0, 2^bits - 1]; 2^(bits-1) for symmetric groups
};

/// Groups of a row of n values: ceil(n / p.group_size). Precondition: p.group_size >= 1.
std::int64_t int_group_count(const QuantParams& p, std::int64_t n);

/// RTN parameters of one group of values (seed 004). Symmetric (absmax): scale =
/// max|x| / (2^(bits-1) - 1), zero = 2^(bits-1), so codes use [1, 2^bits - 1] (e.g. ±7 for
/// 4 bits, ±127 for 8). Asymmetric (zero-point): the range [min(x, 0), max(x, 0)] is mapped onto
/// [0, 2^bits - 1]: scale = (max - min) / (2^bits - 1), zero = round(-min / scale). The scale
/// is rounded to f16 before the zero is computed. An all-zero group gets scale 0.
/// `clip` in (0, 1] shrinks the range first (AWQ's clipping search; 1 = no clipping).
/// Preconditions: bits in {2, 3, 4, 8}, values non-empty and finite.
GroupScale rtn_group_scale(std::span<const float> values, int bits, bool asymmetric, float clip = 1.0f);

/// The code of x: clamp(round(x / scale) + zero, 0, 2^bits - 1) (ties away from zero);
/// g.zero when g.scale == 0.
int quantize_code(float x, const GroupScale& g, int bits);

/// scale * (q - zero).
inline float dequantize_code(int q, const GroupScale& g) { return g.scale * static_cast<float>(q - g.zero); }

/// One kInt row, unpacked: a GroupScale per group and one code per value.
struct IntRow {
  std::vector<GroupScale> groups;   // [int_group_count(p, n)]
  std::vector<std::uint8_t> codes;  // [n], each < 2^bits
};

/// Packs `row` into `dst` (row_bytes(kInt, p, n) bytes, n = row.codes.size()). Scales are stored
/// as f16, zeros as uint8 when p.asymmetric (symmetric groups must have zero 2^(bits-1)).
/// Precondition: p.valid(), row consistent with p.
void pack_int_row(const QuantParams& p, const IntRow& row, std::uint8_t* dst);

/// Inverse of pack_int_row for a row of `n` values at `src`.
IntRow unpack_int_row(const QuantParams& p, const std::uint8_t* src, std::int64_t n);

/// Decodes a packed row of out.size() values to f32 (the scalar reference decoder).
void dequantize_int_row(const QuantParams& p, const std::uint8_t* src, std::span<float> out);

/// RTN of a whole matrix w [rows, cols] f32 row-major into packed kInt rows
/// ([rows * row_bytes(kInt, p, cols)] bytes). Granularity: group-wise (p.group_size < cols),
/// per-channel (p.group_size == cols), or `per_tensor` (one scale and zero for the whole
/// matrix, repeated in every row; requires p.group_size == cols).
/// Precondition: p.valid(), w.size() == rows * cols.
std::vector<std::uint8_t> quantize_int_rtn(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                           const QuantParams& p, bool per_tensor = false);

}  // namespace peregrine

// Where the parts of one kInt weight row lie (layout in core/dtype.h): f16 group scales, uint8
// zero points (asymmetric only), then the bit-packed codes. Shared by the kInt kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "peregrine/core/tensor.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {

struct IntRowLayout {
  int bits = 0;
  bool asymmetric = false;
  std::int64_t in = 0;          // values per row
  std::int64_t group_size = 0;  // values per group (the last group may be shorter)
  std::int64_t groups = 0;      // ceil(in / group_size)
  std::size_t row_bytes = 0;
  std::size_t codes_offset = 0;  // bytes of scales and zeros before the codes

  /// Precondition: w.dtype == kInt, w.quant.valid().
  explicit IntRowLayout(const TensorView& w)
      : bits(w.quant.bits),
        asymmetric(w.quant.asymmetric),
        in(w.row_length()),
        group_size(w.quant.group_size),
        groups((in + group_size - 1) / group_size),
        row_bytes(*w.row_bytes()),
        codes_offset(static_cast<std::size_t>(groups) * (asymmetric ? 3 : 2)) {}

  /// Scale of group g of the row at `row` (the stored f16, widened).
  float scale(const std::uint8_t* row, std::int64_t g) const {
    std::uint16_t h;
    std::memcpy(&h, row + 2 * g, sizeof h);
    return f16_to_f32(h);
  }
  /// Zero point of group g: the stored byte (asymmetric) or 2^(bits-1).
  int zero(const std::uint8_t* row, std::int64_t g) const {
    return asymmetric ? row[2 * groups + g] : 1 << (bits - 1);
  }
  /// Bytes of the packed codes of a row.
  std::size_t code_bytes() const { return row_bytes - codes_offset; }
};

}  // namespace peregrine

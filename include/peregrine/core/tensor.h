// Non-owning views of weight tensors as stored in a model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// A named, read-only, row-major tensor living in a mapped model file (or an owned buffer).
/// `shape` is outermost-first like PyTorch: a Linear weight is {out_features, in_features}
/// (GGUF lists dims innermost-first; readers reverse them). `data` points at `nbytes` bytes in
/// the dtype's block layout; rows are contiguous.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;

  /// Product of the dims (1 for a scalar).
  std::int64_t numel() const;
  /// Length of the innermost dim (0 for a scalar).
  std::int64_t row_length() const { return shape.empty() ? 0 : shape.back(); }
  /// numel() / row_length().
  std::int64_t n_rows() const;
  /// "[512, 64]".
  std::string shape_string() const;
};

}  // namespace peregrine

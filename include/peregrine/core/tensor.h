// Non-owning views of weight tensors as stored in a model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"

namespace peregrine {

/// A named, read-only, row-major tensor living in a mapped model file (or an owned buffer).
/// `shape` is outermost-first like PyTorch: a Linear weight is {out_features, in_features}
/// (GGUF lists dims innermost-first; readers reverse them). `data` points at `nbytes` bytes in
/// the dtype's layout (core/dtype.h); rows are contiguous, each row_bytes() long. `quant`
/// describes DType::kInt tensors (bits, group size, zero points, activation mode) and is
/// default-constructed for every other dtype.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;
  QuantParams quant{};
  /// Optional: the same weights repacked at load for a faster kernel (kernels/cpu/
  /// quant_packed.h for Q4_0 and Q8_0), owned by whoever packed them; `data` keeps the stored layout,
  /// which every other reader uses.
  const void* packed = nullptr;

  /// Product of the dims (1 for a scalar).
  std::int64_t numel() const;
  /// Length of the innermost dim (0 for a scalar).
  std::int64_t row_length() const { return shape.empty() ? 0 : shape.back(); }
  /// numel() / row_length().
  std::int64_t n_rows() const;
  /// Bytes of one row (row_bytes(dtype, quant, row_length())), or nullopt when the row length
  /// does not fit the dtype (a partial block, invalid kInt params).
  std::optional<std::size_t> row_bytes() const;
  /// The dtype's name, with kInt's parameters: "int4 g32 asym", "int8 g64 a8", "int8 g64 a8
  /// outliers 6" (g = group size, a8 = per-token int8 activations).
  std::string format_string() const;
  /// "[512, 64]".
  std::string shape_string() const;
};

/// A kF32 view `name` of `values` as a [rows, cols] row-major matrix (values.size() == rows ·
/// cols; the caller keeps them alive): for matmul over weights held as f32 vectors (draft heads,
/// LoRA A / B).
TensorView f32_matrix_view(std::string name, std::span<const float> values, std::int64_t rows, std::int64_t cols);

}  // namespace peregrine

#include "peregrine/core/tensor.h"

namespace peregrine {

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t TensorView::n_rows() const {
  const auto len = row_length();
  return len == 0 ? 0 : numel() / len;
}

std::optional<std::size_t> TensorView::row_bytes() const {
  return peregrine::row_bytes(dtype, quant, static_cast<std::uint64_t>(row_length()));
}

std::string TensorView::format_string() const {
  if (dtype != DType::kInt) return std::string(dtype_name(dtype));
  std::string s = "int" + std::to_string(quant.bits) + " g" + std::to_string(quant.group_size);
  if (quant.asymmetric) s += " asym";
  if (quant.act_bits == 8) s += " a8";
  if (quant.outlier_threshold > 0.0f) s += " outliers " + std::to_string(static_cast<int>(quant.outlier_threshold));
  return s;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

TensorView f32_matrix_view(std::string name, std::span<const float> values, std::int64_t rows, std::int64_t cols) {
  TensorView v;
  v.name = std::move(name);
  v.dtype = DType::kF32;
  v.shape = {rows, cols};
  v.data = values.data();
  v.nbytes = values.size() * sizeof(float);
  return v;
}

}  // namespace peregrine

#include "peregrine/quant/convert_model.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

constexpr DType kTargets[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kNF4};

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

/// Rows [begin, end) of `t` decoded to f32 (dequantize_row: any stored dtype) and encoded as
/// `to` into `dst` (rows of `row_bytes`).
void convert_rows(const TensorView& t, DType to, std::size_t row_bytes, std::uint8_t* dst,
                  std::int64_t begin, std::int64_t end) {
  std::vector<float> row(static_cast<std::size_t>(t.row_length()));
  for (std::int64_t r = begin; r < end; ++r) {
    dequantize_row(t, r, row);
    quantize_rtn(to, row, dst + static_cast<std::size_t>(r) * row_bytes);
  }
}

/// Converts `t` to `to` in a new buffer, repoints the view at it, and returns the buffer.
std::shared_ptr<const void> convert_tensor(TensorView& t, DType to, ThreadPool* pool) {
  const std::size_t row_bytes = *dtype_row_bytes(to, static_cast<std::uint64_t>(t.row_length()));
  auto buf = std::make_shared<std::vector<std::uint8_t>>(row_bytes * static_cast<std::size_t>(t.n_rows()));
  auto job = [&](std::int64_t begin, std::int64_t end) {
    convert_rows(t, to, row_bytes, buf->data(), begin, end);
  };
  if (pool) {
    pool->parallel_for(t.n_rows(), job);
  } else {
    job(0, t.n_rows());
  }
  t.dtype = to;
  t.quant = {};
  t.data = buf->data();
  t.nbytes = buf->size();
  return buf;
}

}  // namespace

DType matrix_dtype_for(DType target, std::int64_t row_length) {
  return dtype_row_bytes(target, static_cast<std::uint64_t>(row_length)) ? target : DType::kF16;
}

std::span<const DType> convert_target_dtypes() { return kTargets; }

Expected<std::vector<std::string>> convert_model_weights(ModelFile& m, DType target, ThreadPool* pool) {
  if (std::find(std::begin(kTargets), std::end(kTargets), target) == std::end(kTargets)) {
    return invalid_argument("converting weights to " + std::string(dtype_name(target)) + " is not supported");
  }
  for (const auto& [name, t] : m.tensors) {
    if (!is_float(t.dtype) && target != DType::kF32) {
      return unsupported(m.path + " is already quantized (tensor '" + name + "' is " + t.format_string() +
                         "): converting to " + std::string(dtype_name(target)) +
                         " needs an F32/F16/BF16 model (re-quantizing compounds rounding errors; f32 decodes it exactly)");
    }
  }
  std::vector<std::string> fell_back;
  for (auto& [name, t] : m.tensors) {
    if (t.shape.size() != 2) continue;
    const DType to = matrix_dtype_for(target, t.row_length());
    if (to != target) fell_back.push_back(name);
    if (to != t.dtype) m.storage.push_back(convert_tensor(t, to, pool));
  }
  return fell_back;
}

}  // namespace peregrine

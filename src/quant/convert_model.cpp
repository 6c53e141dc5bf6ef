#include "peregrine/quant/convert_model.h"

#include <memory>

#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

bool is_block_quantized(DType t) { return dtype_block_size(t) > 1; }

/// Rows [begin, end) of `t` decoded to f32 and encoded as `to` into `dst` (rows of `row_bytes`).
void convert_rows(const TensorView& t, DType to, std::size_t row_bytes, std::uint8_t* dst,
                  std::int64_t begin, std::int64_t end) {
  const auto n = static_cast<std::size_t>(t.row_length());
  const std::size_t src_row_bytes = t.nbytes / static_cast<std::size_t>(t.n_rows());
  const auto* src = static_cast<const std::uint8_t*>(t.data);
  std::vector<float> row(n);
  for (auto r = static_cast<std::size_t>(begin); r < static_cast<std::size_t>(end); ++r) {
    dequantize(t.dtype, src + r * src_row_bytes, row);
    quantize_rtn(to, row, dst + r * row_bytes);
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
  t.data = buf->data();
  t.nbytes = buf->size();
  return buf;
}

}  // namespace

DType matrix_dtype_for(DType target, std::int64_t row_length) {
  return dtype_row_bytes(target, static_cast<std::uint64_t>(row_length)) ? target : DType::kF16;
}

Expected<std::vector<std::string>> convert_model_weights(ModelFile& m, DType target, ThreadPool* pool) {
  for (const auto& [name, t] : m.tensors) {
    if (is_block_quantized(t.dtype)) {
      return unsupported(m.path + " is already quantized (tensor '" + name + "' is " +
                         std::string(dtype_name(t.dtype)) + "): converting to " +
                         std::string(dtype_name(target)) +
                         " needs an F32/F16/BF16 model (re-quantizing compounds rounding errors)");
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

#include "kernels/cuda/device_matrix.cuh"

#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_status.cuh"
#include "peregrine/quant/dequantize.h"

namespace peregrine::cuda {
namespace {

constexpr std::int64_t kBlock = 32;

std::int64_t round_up8(std::int64_t n) { return (n + 7) / 8 * 8; }

Status to_device(const void* host, std::size_t bytes, void** dev) {
  PEREGRINE_CUDA_RETURN(cudaMalloc(dev, bytes), "cudaMalloc (weights)");
  return cuda_status(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
}

// Rows of `elt`-byte values copied into a zero-padded [rows, stride] host image, then uploaded.
Status upload_rows(const TensorView& w, std::int64_t elt, DeviceMatrix& out) {
  const std::int64_t rows = w.shape[0], cols = w.shape[1];
  out.stride = round_up8(cols);
  std::vector<std::uint8_t> image(static_cast<std::size_t>(rows * out.stride * elt), 0);
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(&image[static_cast<std::size_t>(r * out.stride * elt)], src + r * cols * elt, static_cast<std::size_t>(cols * elt));
  }
  out.bytes = static_cast<std::int64_t>(image.size());
  return to_device(image.data(), image.size(), &out.data);
}

// GGUF Q8_0 (34-byte blocks: f16 d, 32 int8) / Q4_0 (18-byte: f16 d, 16 nibble bytes) split
// into code blocks and scales.
Status upload_blocks(const TensorView& w, std::int64_t code_bytes, DeviceMatrix& out) {
  const std::int64_t n_blocks = w.shape[0] * (w.shape[1] / kBlock), block_bytes = 2 + code_bytes;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n_blocks * code_bytes));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(n_blocks));
  const auto* src = static_cast<const std::uint8_t*>(w.data);
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    std::memcpy(&scales[static_cast<std::size_t>(b)], src + b * block_bytes, 2);
    std::memcpy(&codes[static_cast<std::size_t>(b * code_bytes)], src + b * block_bytes + 2, static_cast<std::size_t>(code_bytes));
  }
  out.bytes = n_blocks * block_bytes;
  PEREGRINE_RETURN_IF_ERROR(to_device(codes.data(), codes.size(), &out.data));
  void* d = nullptr;
  PEREGRINE_RETURN_IF_ERROR(to_device(scales.data(), scales.size() * 2, &d));
  out.scales = static_cast<__half*>(d);
  return Status::ok();
}

// Any other dtype: decoded rows → f16, padded like kF16.
Status upload_decoded(const TensorView& w, DeviceMatrix& out) {
  const std::int64_t rows = w.shape[0], cols = w.shape[1];
  out.format = MatrixFormat::kF16;
  out.stride = round_up8(cols);
  std::vector<__half> image(static_cast<std::size_t>(rows * out.stride), __float2half(0.0f));
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_row(w, r, row);
    for (std::int64_t j = 0; j < cols; ++j) image[static_cast<std::size_t>(r * out.stride + j)] = __float2half_rn(row[static_cast<std::size_t>(j)]);
  }
  out.bytes = static_cast<std::int64_t>(image.size() * 2);
  return to_device(image.data(), image.size() * 2, &out.data);
}

}  // namespace

Status upload_matrix(const TensorView& w, DeviceMatrix& out) {
  out = DeviceMatrix{};
  out.rows = w.shape[0];
  out.cols = w.shape[1];
  switch (w.dtype) {
    case DType::kF32: out.format = MatrixFormat::kF32; return upload_rows(w, 4, out);
    case DType::kF16: out.format = MatrixFormat::kF16; return upload_rows(w, 2, out);
    case DType::kBF16: out.format = MatrixFormat::kBF16; return upload_rows(w, 2, out);
    case DType::kQ8_0: out.format = MatrixFormat::kQ8_0; return upload_blocks(w, 32, out);
    case DType::kQ4_0: out.format = MatrixFormat::kQ4_0; return upload_blocks(w, 16, out);
    default: return upload_decoded(w, out);
  }
}

Status upload_stacked(std::span<const TensorView* const> parts, DeviceMatrix& out) {
  const TensorView& first = *parts.front();
  TensorView stacked = first;
  stacked.shape = {0, first.shape[1]};
  std::vector<std::uint8_t> bytes;
  for (const TensorView* t : parts) {
    if (t->dtype != first.dtype || t->shape[1] != first.shape[1]) {
      return invalid_argument("upload_stacked: " + t->name + " differs from " + first.name + " in dtype or row length");
    }
    const auto* p = static_cast<const std::uint8_t*>(t->data);
    bytes.insert(bytes.end(), p, p + t->nbytes);
    stacked.shape[0] += t->shape[0];
  }
  stacked.data = bytes.data();
  stacked.nbytes = bytes.size();
  stacked.packed = nullptr;
  return upload_matrix(stacked, out);
}

void free_matrix(DeviceMatrix& m) {
  if (m.data != nullptr) cudaFree(m.data);
  if (m.scales != nullptr) cudaFree(m.scales);
  m = DeviceMatrix{};
}

}  // namespace peregrine::cuda

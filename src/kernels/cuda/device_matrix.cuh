// A weight matrix [rows, cols] in device memory, in the layout the CUDA kernels read.
//  - kF32 / kF16 / kBF16: row-major with `stride` = cols rounded up to 8 values (zero padded),
//    so every row starts 16-byte aligned for the GEMV's vector loads.
//  - kQ8_0 / kQ4_0 (GGUF blocks of 32 values): repacked into `data` = [rows, cols/32] blocks of
//    codes (Q8_0: 32 int8; Q4_0: 16 bytes, byte j holding value j in its low nibble and value
//    j + 16 in its high one, as GGUF stores them) and `scales` = [rows, cols/32] f16 — the
//    stored bytes, split so that code blocks are 16-byte aligned.
// Any other stored dtype (K-quants, IQ4_NL, ...) is decoded exactly to f32 on the host
// (quant/dequantize.h) and kept as kF16.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <span>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"

namespace peregrine::cuda {

enum class MatrixFormat { kF32, kF16, kBF16, kQ8_0, kQ4_0 };

struct DeviceMatrix {
  MatrixFormat format = MatrixFormat::kF32;
  std::int64_t rows = 0, cols = 0;
  std::int64_t stride = 0;          // values per row in `data` (float formats)
  void* data = nullptr;             // owned (cudaFree)
  __half* scales = nullptr;         // Q8_0 / Q4_0, owned
  std::int64_t bytes = 0;           // device bytes of data + scales (read once per GEMV)

  bool quantized() const { return format == MatrixFormat::kQ8_0 || format == MatrixFormat::kQ4_0; }
};

/// Uploads `w` (2-D {rows, cols}, any dtype dequantize_row reads) as above.
/// Errors: kResourceExhausted (device memory), kUnavailable (other CUDA errors).
Status upload_matrix(const TensorView& w, DeviceMatrix& out);

/// Uploads the row-wise concatenation of `parts` (each 2-D with the same dtype and row length)
/// as one matrix, as upload_matrix would the stacked tensor: Q/K/V or gate/up multiplied in
/// one launch. Errors: kInvalidArgument (parts that differ in dtype or row length), and
/// upload_matrix's.
Status upload_stacked(std::span<const TensorView* const> parts, DeviceMatrix& out);

/// Frees a matrix's device memory (no-op on an empty one).
void free_matrix(DeviceMatrix& m);

}  // namespace peregrine::cuda

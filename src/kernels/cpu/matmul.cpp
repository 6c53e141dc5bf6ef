#include "peregrine/kernels/cpu/matmul.h"

#include <vector>

#include "peregrine/kernels/cpu/gemm_quant.h"
#include "peregrine/kernels/cpu/quantize_activations.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

const float* row_as_f32(const TensorView& w, std::int64_t row, std::vector<float>& scratch) {
  const std::int64_t in = w.row_length();
  const std::size_t row_bytes = w.nbytes / static_cast<std::size_t>(w.n_rows());
  const auto* src = static_cast<const std::uint8_t*>(w.data) + row * row_bytes;
  // F32 rows are used in place when aligned (safetensors/GGUF alignment 1 may leave them not).
  if (w.dtype == DType::kF32 && reinterpret_cast<std::uintptr_t>(src) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(src);
  }
  dequantize(w.dtype, src, std::span<float>(scratch.data(), static_cast<std::size_t>(in)));
  return scratch.data();
}

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void matmul(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
            std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  if (w.dtype == DType::kQ8_0 || w.dtype == DType::kQ4_0) {  // integer dot products, 8-bit activations
    thread_local QuantizedActivations xq;  // reused: no allocation per call
    quantize_activations(x, n_tokens, in, xq, pool);
    gemm_quant(w, xq, y, pool, min_parallel_macs);
    return;
  }
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scratch(static_cast<std::size_t>(in));
    for (std::int64_t o = begin; o < end; ++o) {
      const float* wr = row_as_f32(w, o, scratch);
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot(wr, &x[t * in], in);
    }
  };
  if (out * in * n_tokens < min_parallel_macs) {
    rows(0, out);
    return;
  }
  pool.parallel_for(out, rows);
}

void matmul_reference(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                      std::span<float> y) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  std::vector<float> full(static_cast<std::size_t>(out * in));
  dequantize(w.dtype, w.data, full);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      double s = 0.0;
      for (std::int64_t i = 0; i < in; ++i) s += static_cast<double>(full[o * in + i]) * x[t * in + i];
      y[t * out + o] = static_cast<float>(s);
    }
  }
}

}  // namespace peregrine

#include "peregrine/kernels/cpu/matmul.h"

#include <vector>

#include "peregrine/kernels/cpu/float_matmul.h"
#include "peregrine/kernels/cpu/gemm_quant.h"
#include "peregrine/kernels/cpu/quantize_activations.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {

void matmul(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
            std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  if (is_float_dtype(w.dtype)) {
    matmul_float(w, x, n_tokens, y, pool, min_parallel_macs);
    return;
  }
  // Q8_0 / Q4_0: integer dot products against 8-bit activation blocks.
  thread_local QuantizedActivations xq;  // reused: no allocation per call
  quantize_activations(x, n_tokens, w.row_length(), xq, pool);
  gemm_quant(w, xq, y, pool, min_parallel_macs);
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

#include "peregrine/kernels/cpu/matmul/float_matmul.h"

#include <cstdint>
#include <cstring>

#include "kernels/cpu/row_split.h"
#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/kernels/cpu/matmul/gemm_bf16_dot.h"
#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/quant/fp16.h"

namespace peregrine {
namespace {

// Stored weight e of row-major float tensor w, widened to f32 (read bytewise: any alignment).
float weight_at(const TensorView& w, std::int64_t e) {
  const auto* p = static_cast<const std::uint8_t*>(w.data);
  if (w.dtype == DType::kF32) {
    float v;
    std::memcpy(&v, p + e * 4, 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p + e * 2, 2);
  return w.dtype == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
}

}  // namespace

bool is_float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

bool uses_bf16_dot(const TensorView& w, std::int64_t n_tokens) {
  return n_tokens >= kGemmMinTokens && bf16_activations() == Bf16Activations::kBf16 && gemm_bf16_dot_available() &&
         gemm_bf16_dot_takes(w);
}

void matmul_float(const TensorView& w, std::span<const float> x, std::int64_t n_tokens,
                  std::span<float> y, ThreadPool& pool, std::int64_t min_parallel_macs) {
  const bool gemm = n_tokens >= kGemmMinTokens;
  const bool bf16_dot = uses_bf16_dot(w, n_tokens);
  split_rows(w.n_rows(), w.row_length() * n_tokens, gemm ? kGemmRows : kGemvRows, pool, min_parallel_macs,
             [&](std::int64_t begin, std::int64_t end) {
               if (bf16_dot) {
                 gemm_bf16_dot(w, x, n_tokens, y, begin, end);
               } else if (gemm) {
                 gemm_float(w, x, n_tokens, y, begin, end);
               } else {
                 gemv_float(w, x, n_tokens, y, begin, end);
               }
             });
}

void float_matmul_reference(const TensorView& w, std::span<const float> x,
                            std::int64_t n_tokens, std::span<float> y, std::int64_t row_begin,
                            std::int64_t row_end) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t o = row_begin; o < row_end; ++o) {
      float s = 0.0f;
      for (std::int64_t i = 0; i < in; ++i) s += weight_at(w, o * in + i) * x[t * in + i];
      y[t * out + o] = s;
    }
  }
}

}  // namespace peregrine

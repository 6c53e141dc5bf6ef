#include "peregrine/kernels/cpu/gemm_nf4.h"

#include <algorithm>
#include <vector>

#include "peregrine/kernels/cpu/gemm_float.h"
#include "peregrine/kernels/cpu/gemv_float.h"
#include "peregrine/kernels/cpu/float_matmul.h"
#include "peregrine/quant/nf4.h"

namespace peregrine {
namespace {

constexpr std::int64_t kDecodeRows = 64;  // rows decoded per pass: 64 · in f32 (L2-resident)

}  // namespace

void gemm_nf4(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
              std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t in = w.row_length(), out = w.n_rows();
  const std::size_t row_bytes = *w.row_bytes();
  thread_local std::vector<float> rows, part;  // decoded rows [k, in], their products [n_tokens, k]
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kDecodeRows) {
    const std::int64_t k = std::min(kDecodeRows, row_end - r0);
    rows.resize(static_cast<std::size_t>(k * in));
    part.resize(static_cast<std::size_t>(n_tokens * k));
    for (std::int64_t j = 0; j < k; ++j) {
      nf4_decode_row(static_cast<const std::uint8_t*>(w.data) + static_cast<std::size_t>(r0 + j) * row_bytes,
                     std::span<float>(rows).subspan(static_cast<std::size_t>(j * in), static_cast<std::size_t>(in)));
    }
    const TensorView decoded = f32_matrix_view(w.name, rows, k, in);
    if (n_tokens >= kGemmMinTokens) {
      gemm_float(decoded, x, n_tokens, part, 0, k);
    } else {
      gemv_float(decoded, x, n_tokens, part, 0, k);
    }
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      std::copy_n(part.begin() + t * k, k, y.begin() + t * out + r0);
    }
  }
}

}  // namespace peregrine

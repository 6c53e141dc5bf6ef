#include "peregrine/kernels/cpu/sparse/sparse_nm_matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/row_split.h"
#include "peregrine/kernels/cpu/matmul/float_matmul.h"
#include "peregrine/kernels/cpu/matmul/gemm_float.h"
#include "peregrine/kernels/cpu/matmul/gemv_float.h"
#include "peregrine/kernels/cpu/sparse/sparse_nm_expand.h"

namespace peregrine {

void matmul_sparse_nm(const TensorView& w, std::span<const float> x, std::int64_t n_tokens, std::span<float> y,
                      ThreadPool& pool, std::int64_t min_parallel_macs) {
  const std::int64_t out = w.n_rows(), in = w.row_length();
  const auto n_in = static_cast<std::size_t>(in);
  split_rows(out, in * n_tokens, kSparsePanelRows, pool, min_parallel_macs, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> panel, y_panel;  // reused: no allocation per call
    for (std::int64_t p = begin; p < end; p += kSparsePanelRows) {
      const std::int64_t rows = std::min(kSparsePanelRows, end - p);
      panel.resize(static_cast<std::size_t>(rows) * n_in);
      y_panel.resize(static_cast<std::size_t>(rows * n_tokens));
      for (std::int64_t r = 0; r < rows; ++r) {
        expand_sparse_nm_row(w, p + r, std::span<float>(panel).subspan(static_cast<std::size_t>(r) * n_in, n_in));
      }
      const TensorView dense{std::string("panel"), DType::kF32, {rows, in}, panel.data(), panel.size() * sizeof(float)};
      (n_tokens >= kGemmMinTokens ? gemm_float : gemv_float)(dense, x, n_tokens, y_panel, 0, rows);
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        std::copy_n(y_panel.begin() + t * rows, rows, y.begin() + t * out + p);
      }
    }
  });
}

}  // namespace peregrine

#include "peregrine/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

// GCC 12 flags Eigen's AVX-512 GEMM kernels (an _mm512_undefined operand) as (maybe-)uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>

#include "peregrine/quant/int_group.h"

namespace peregrine {
namespace {

// AutoAWQ's floor on mean|x|^α before normalization (keeps s > 0 for dead channels).
constexpr double kMinScale = 1e-4;

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float a) { return std::isfinite(a); });
}

Status check_inputs(const AwqWeights& ws, std::int64_t cols, std::span<const float> x, std::int64_t n,
                    std::span<const float> x_abs_mean, const AwqOptions& o) {
  if (!o.params.valid()) return invalid_argument("awq: invalid quantization parameters");
  if (o.grid < 1) return invalid_argument("awq: grid " + std::to_string(o.grid) + " < 1");
  if (ws.w.empty() || ws.w.size() != ws.rows.size()) {
    return invalid_argument("awq: " + std::to_string(ws.w.size()) + " matrices with " +
                            std::to_string(ws.rows.size()) + " row counts");
  }
  if (cols < 1 || n < 1 || static_cast<std::int64_t>(x.size()) != n * cols ||
      static_cast<std::int64_t>(x_abs_mean.size()) != cols) {
    return invalid_argument("awq: sample of " + std::to_string(x.size()) + " values and " +
                            std::to_string(x_abs_mean.size()) + " channel means do not fit n = " +
                            std::to_string(n) + " rows of " + std::to_string(cols) + " channels");
  }
  for (std::size_t i = 0; i < ws.w.size(); ++i) {
    if (ws.rows[i] < 1 || static_cast<std::int64_t>(ws.w[i].size()) != ws.rows[i] * cols) {
      return invalid_argument("awq: matrix " + std::to_string(i) + " has " + std::to_string(ws.w[i].size()) +
                              " values, not " + std::to_string(ws.rows[i]) + " x " + std::to_string(cols));
    }
    if (!all_finite(ws.w[i])) return invalid_argument("awq: matrix " + std::to_string(i) + " has non-finite weights");
  }
  if (!all_finite(x)) return invalid_argument("awq: the activation sample has non-finite values");
  if (!all_finite(x_abs_mean) || *std::min_element(x_abs_mean.begin(), x_abs_mean.end()) < 0.0f) {
    return invalid_argument("awq: channel means must be finite and >= 0");
  }
  return Status::ok();
}

// s = max(mean|x|^α, 1e-4) / sqrt(max(s) · min(s)) (AWQ's normalization, as in llm-awq/AutoAWQ).
std::vector<float> awq_scales(std::span<const float> x_abs_mean, double alpha) {
  std::vector<double> s(x_abs_mean.size());
  for (std::size_t j = 0; j < s.size(); ++j) s[j] = std::max(std::pow(static_cast<double>(x_abs_mean[j]), alpha), kMinScale);
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const double norm = std::sqrt(*lo * *hi);
  std::vector<float> out(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) out[j] = static_cast<float>(s[j] / norm);
  return out;
}

// W − RTN(W·diag(s))·diag(s)⁻¹ for w [rows, cols]: the weight error AWQ's scales leave.
std::vector<float> scaled_rtn_error(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                    std::span<const float> s, const QuantParams& p) {
  const auto c = static_cast<std::size_t>(cols);
  std::vector<float> ws(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) ws[i] = w[i] * s[i % c];
  const std::vector<std::uint8_t> packed = quantize_int_rtn(ws, rows, cols, p);
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(cols));
  std::vector<float> err(w.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::span<float> row(err.data() + static_cast<std::size_t>(r) * c, c);
    dequantize_int_row(p, packed.data() + static_cast<std::size_t>(r) * rb, row);
    for (std::size_t j = 0; j < c; ++j) row[j] = w[static_cast<std::size_t>(r) * c + j] - row[j] / s[j];
  }
  return err;
}

// ||x·errᵀ||² / n for x [n, cols], err [rows, cols]: the product by Eigen's blocked f32 GEMM,
// the squares summed in f64.
double output_error(std::span<const float> x, std::int64_t n, std::span<const float> err, std::int64_t cols) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto rows = static_cast<Eigen::Index>(err.size()) / cols;
  const Eigen::Map<const RowMajor> xm(x.data(), n, cols), em(err.data(), rows, cols);
  const RowMajor y = xm * em.transpose();
  double sum = 0.0;
  for (Eigen::Index i = 0; i < y.size(); ++i) sum += static_cast<double>(y.data()[i]) * y.data()[i];
  return sum / static_cast<double>(n);
}

// Σ_i ||x W_iᵀ − (x/s) Q(W_i·diag(s))ᵀ||² / n.
double awq_loss(const AwqWeights& ws, std::int64_t cols, std::span<const float> x, std::int64_t n,
                std::span<const float> s, const QuantParams& p) {
  double loss = 0.0;
  for (std::size_t i = 0; i < ws.w.size(); ++i) {
    loss += output_error(x, n, scaled_rtn_error(ws.w[i], ws.rows[i], cols, s, p), cols);
  }
  return loss;
}

}  // namespace

Expected<AwqScales> awq_search_scales(const AwqWeights& ws, std::int64_t cols, std::span<const float> x,
                                      std::int64_t n, std::span<const float> x_abs_mean, const AwqOptions& o) {
  PEREGRINE_RETURN_IF_ERROR(check_inputs(ws, cols, x, n, x_abs_mean, o));
  AwqScales best;
  best.loss_awq = std::numeric_limits<double>::infinity();
  for (int g = 0; g < o.grid; ++g) {
    const double alpha = static_cast<double>(g) / o.grid;
    std::vector<float> s = awq_scales(x_abs_mean, alpha);
    const double loss = awq_loss(ws, cols, x, n, s, o.params);
    if (g == 0) best.loss_rtn = loss;
    if (loss < best.loss_awq) {
      best.scales = std::move(s);
      best.alpha = static_cast<float>(alpha);
      best.loss_awq = loss;
    }
  }
  return best;
}

}  // namespace peregrine

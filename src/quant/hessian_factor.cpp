#include "peregrine/quant/hessian_factor.h"

#include <Eigen/Cholesky>
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace peregrine {
namespace {

constexpr int kDampRetries = 10;
constexpr std::int64_t kRowTile = 32;

}  // namespace

LiveHessian live_hessian(std::span<const double> hessian, std::int64_t cols) {
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  LiveHessian out{Eigen::Map<const RowMajor>(hessian.data(), cols, cols), std::vector<bool>(static_cast<std::size_t>(cols))};
  for (std::int64_t j = 0; j < cols; ++j) {
    out.dead[static_cast<std::size_t>(j)] = out.h(j, j) == 0.0;
    if (out.h(j, j) == 0.0) out.h(j, j) = 1.0;
  }
  return out;
}

Expected<HessianFactor> inverse_hessian_factor(const HessianMatrix& h, double damp_percent, std::string_view who) {
  const Eigen::Index n = h.rows();
  double lambda = damp_percent * h.diagonal().mean();
  for (int attempt = 0; attempt <= kDampRetries; ++attempt, lambda *= 2.0) {
    HessianMatrix damped = h;
    damped.diagonal().array() += lambda;
    const Eigen::LLT<Eigen::Ref<HessianMatrix>> llt(damped);  // factors in place
    if (llt.info() == Eigen::Success) {
      HessianMatrix h_inv = llt.solve(HessianMatrix::Identity(n, n));
      const Eigen::LLT<Eigen::Ref<HessianMatrix>> inverse(h_inv);
      if (inverse.info() == Eigen::Success) {
        HessianFactor u = inverse.matrixU();
        if (u.allFinite()) return u;
      }
    }
    if (!(lambda > 0.0)) break;  // nothing to double
  }
  return invalid_argument(std::string(who) + ": H + λI is not positive definite (damp_percent " + std::to_string(damp_percent) +
                          ", λ doubled " + std::to_string(kDampRetries) +
                          " times); use more calibration data or a larger damp_percent");
}

double sum_over_row_tiles(std::int64_t rows, ThreadPool* pool, const std::function<double(std::int64_t, std::int64_t)>& sweep) {
  const std::int64_t n_tiles = (rows + kRowTile - 1) / kRowTile;
  std::vector<double> tile_result(static_cast<std::size_t>(n_tiles));
  const auto run = [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) tile_result[static_cast<std::size_t>(t)] = sweep(t * kRowTile, std::min(rows, (t + 1) * kRowTile));
  };
  if (pool != nullptr) {
    pool->parallel_for(n_tiles, run);
  } else {
    run(0, n_tiles);
  }
  return std::accumulate(tile_result.begin(), tile_result.end(), 0.0);
}

}  // namespace peregrine

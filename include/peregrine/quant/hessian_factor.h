// The inverse-Hessian factor that GPTQ (Frantar et al. 2023) and SparseGPT (Frantar & Alistarh,
// ICML 2023) share: both walk a weight matrix column by column and spread each column's error
// onto the later columns through U, the upper Cholesky factor of (H + λI)⁻¹, where
// H = (2/n) Σ x xᵀ is the Hessian of the layer's reconstruction loss ||W X − Ŵ X||².
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"

namespace peregrine {

using HessianMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;                    // column-major
using HessianFactor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;  // U, row-major

/// A calibration Hessian with its dead inputs made harmless, as the reference code does.
struct LiveHessian {
  HessianMatrix h;         // [cols, cols]; H_jj = 1 where it was 0
  std::vector<bool> dead;  // [cols]: H_jj was 0 (the input never fired: its weights are zeroed)
};

/// hessian [cols, cols] f64 row-major → LiveHessian. Precondition: hessian.size() == cols².
LiveHessian live_hessian(std::span<const double> hessian, std::int64_t cols);

/// U with Uᵀ U = (H + λI)⁻¹, λ = damp_percent · mean(diag H), doubling λ up to 10 times while
/// H + λI or its inverse is not numerically positive definite (Eigen LLT).
/// Errors: kInvalidArgument "`who`: H + λI is not positive definite ..." suggesting more
/// calibration data or a larger damp_percent.
Expected<HessianFactor> inverse_hessian_factor(const HessianMatrix& h, double damp_percent, std::string_view who);

/// Runs `sweep`(r0, r1) over fixed tiles of 32 rows covering [0, rows) — each row's sweep is
/// independent given U — on `pool` when given (else on the calling thread), and returns the sum
/// of the tiles' results (their losses) in tile order, so it does not depend on the pool.
double sum_over_row_tiles(std::int64_t rows, ThreadPool* pool, const std::function<double(std::int64_t, std::int64_t)>& sweep);

}  // namespace peregrine

// GPTQ (Frantar et al., ICLR 2023, Algorithm 1), step for step as the reference implementation
// (IST-DASLab gptq.py, AutoGPTQ's GPTQ.fasterquant): dead inputs, act-order permutation with
// static groups, dampening, U = upper Cholesky factor of (H + λI)⁻¹, lazy block updates.
//
// One deviation, on purpose: in natural order a group's RTN parameters are taken from its fully
// error-updated weights. The reference reads them from the matrix as it was at the start of the
// lazy block (stale when a group starts inside a block); here a block also ends at every group
// boundary, so when a group starts every earlier column's update has been applied. Lazy batching
// is exact arithmetic regrouping, so this changes only which weights the scales see.
//
// The sweep is done in f64 (the Hessian's precision); every row is independent given U, so rows
// are processed in fixed tiles (the unit handed to the thread pool).
#include "peregrine/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "peregrine/quant/hessian_factor.h"
#include "peregrine/quant/int_group.h"

namespace peregrine {
namespace {

using Matrix = HessianMatrix;
using RowMatrix = HessianFactor;


bool all_finite(auto values) {
  return std::all_of(values.begin(), values.end(), [](auto v) { return std::isfinite(v); });
}

Status validate(std::span<const float> w, std::int64_t rows, std::int64_t cols, std::span<const double> hessian,
                const GptqOptions& o) {
  if (rows < 1 || cols < 1) {
    return invalid_argument("gptq: rows and cols must be >= 1, got " + std::to_string(rows) + " x " +
                            std::to_string(cols));
  }
  const auto n = static_cast<std::size_t>(cols);
  if (w.size() % n != 0 || w.size() / n != static_cast<std::size_t>(rows)) {
    return invalid_argument("gptq: w has " + std::to_string(w.size()) + " values, expected rows * cols = " +
                            std::to_string(rows) + " * " + std::to_string(cols));
  }
  if (hessian.size() % n != 0 || hessian.size() / n != n) {
    return invalid_argument("gptq: hessian has " + std::to_string(hessian.size()) + " values, expected cols² = " +
                            std::to_string(cols) + "²");
  }
  if (!o.params.valid()) return invalid_argument("gptq: invalid quantization parameters");
  if (o.params.group_size > cols) {
    return invalid_argument("gptq: group_size " + std::to_string(o.params.group_size) + " exceeds cols " +
                            std::to_string(cols));
  }
  if (o.block_size < 1) return invalid_argument("gptq: block_size must be >= 1, got " + std::to_string(o.block_size));
  if (!(o.damp_percent >= 0.0)) return invalid_argument("gptq: damp_percent must be >= 0");
  if (!all_finite(w) || !all_finite(hessian)) return invalid_argument("gptq: non-finite value in w or hessian");
  return Status::ok();
}

/// What every row's sweep shares: the column order and the inverse-Hessian factor.
struct Plan {
  const GptqOptions& o;
  std::int64_t cols;
  std::vector<std::int64_t> perm;  // perm[k] = natural index of the k-th column quantized
  std::vector<bool> dead;          // [cols] natural order: H_jj == 0
  RowMatrix u;                     // [cols, cols] upper Cholesky factor of (H + λI)⁻¹, perm order
};

/// Columns by decreasing diag(H) (stable, so ties keep their natural order), or the identity.
std::vector<std::int64_t> column_order(const Matrix& h, bool act_order) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(h.rows()));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order) std::stable_sort(perm.begin(), perm.end(), [&h](auto a, auto b) { return h(a, a) > h(b, b); });
  return perm;
}

Expected<Plan> make_plan(std::span<const double> hessian, std::int64_t cols, const GptqOptions& o) {
  auto [h, dead] = live_hessian(hessian, cols);
  std::vector<std::int64_t> perm = column_order(h, o.act_order);
  const auto idx = [&perm](Eigen::Index k) { return perm[static_cast<std::size_t>(k)]; };
  const Matrix permuted =
      Matrix::NullaryExpr(cols, cols, [&](Eigen::Index a, Eigen::Index b) { return h(idx(a), idx(b)); });
  PEREGRINE_ASSIGN_OR_RETURN(RowMatrix u, inverse_hessian_factor(permuted, o.damp_percent, "gptq"));
  return Plan{o, cols, std::move(perm), std::move(dead), std::move(u)};
}

/// End of the lazy block starting at column i1 (perm order); in natural order it also stops at
/// the next group boundary so that the group's scales see fully updated weights.
std::int64_t block_end(const Plan& plan, std::int64_t i1) {
  std::int64_t end = std::min(plan.cols, i1 + plan.o.block_size);
  if (!plan.o.act_order) end = std::min(end, (i1 / plan.o.params.group_size + 1) * plan.o.params.group_size);
  return end;
}

/// One tile of rows during the sweep: current weights (perm column order once the sweep
/// starts) and their codes and group parameters (natural order).
struct Tile {
  Matrix w;                  // [m, cols] f64
  std::vector<IntRow> rows;  // [m]
};

/// RTN parameters of group `g` of every tile row, from tile.w's columns [first, first + len):
/// the group's own columns (natural order, or before the act-order permutation).
void set_group_scales(const QuantParams& p, std::int64_t first, std::int64_t g, Tile& tile) {
  const std::int64_t len = std::min(p.group_size, tile.w.cols() - first);
  std::vector<float> values(static_cast<std::size_t>(len));
  for (Eigen::Index r = 0; r < tile.w.rows(); ++r) {
    for (std::int64_t i = 0; i < len; ++i) values[static_cast<std::size_t>(i)] = static_cast<float>(tile.w(r, first + i));
    GroupScale& scale = tile.rows[static_cast<std::size_t>(r)].groups[static_cast<std::size_t>(g)];
    scale = rtn_group_scale(values, p.bits, p.asymmetric);
  }
}

/// Rows [r0, r1) of w with dead inputs zeroed; with act_order, their static group parameters
/// taken and their columns permuted.
Tile load_tile(const Plan& plan, std::span<const float> w, std::int64_t r0, std::int64_t r1) {
  const QuantParams& p = plan.o.params;
  const std::int64_t m = r1 - r0, cols = plan.cols, n_groups = int_group_count(p, cols);
  Tile tile{Matrix(m, cols), std::vector<IntRow>(static_cast<std::size_t>(m))};
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) {
      tile.w(r, j) = plan.dead[static_cast<std::size_t>(j)] ? 0.0 : w[static_cast<std::size_t>((r0 + r) * cols + j)];
    }
    tile.rows[static_cast<std::size_t>(r)].groups.resize(static_cast<std::size_t>(n_groups));
    tile.rows[static_cast<std::size_t>(r)].codes.resize(static_cast<std::size_t>(cols));
  }
  if (plan.o.act_order) {
    for (std::int64_t g = 0; g < n_groups; ++g) set_group_scales(p, g * p.group_size, g, tile);
    const auto natural = [&plan](Eigen::Index k) { return plan.perm[static_cast<std::size_t>(k)]; };
    Matrix permuted = Matrix::NullaryExpr(m, cols, [&](Eigen::Index r, Eigen::Index k) { return tile.w(r, natural(k)); });
    tile.w = std::move(permuted);
  }
  return tile;
}

/// Quantizes column i (perm order) of every tile row: codes, dequantized values into
/// `dequantized` (the tile's rows of the result), scaled errors (w - q) / U_ii into `err`.
void quantize_column(const Plan& plan, std::int64_t i, Tile& tile, std::span<float> dequantized,
                     Eigen::Ref<Eigen::VectorXd> err) {
  const QuantParams& p = plan.o.params;
  const std::int64_t j = plan.perm[static_cast<std::size_t>(i)];
  const double d = plan.u(i, i);
  for (Eigen::Index r = 0; r < tile.w.rows(); ++r) {
    IntRow& row = tile.rows[static_cast<std::size_t>(r)];
    const GroupScale& g = row.groups[static_cast<std::size_t>(j / p.group_size)];
    const int code = quantize_code(static_cast<float>(tile.w(r, i)), g, p.bits);
    row.codes[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(code);
    const float q = dequantize_code(code, g);
    dequantized[static_cast<std::size_t>(r * plan.cols + j)] = q;
    err(r) = (tile.w(r, i) - q) / d;
  }
}

/// GPTQ of rows [r0, r1) of w: writes their packed and dequantized rows into `out`, returns
/// their share of the proxy loss.
double quantize_rows(const Plan& plan, std::span<const float> w, std::int64_t r0, std::int64_t r1, GptqResult& out) {
  const QuantParams& p = plan.o.params;
  const std::int64_t m = r1 - r0, cols = plan.cols;
  Tile tile = load_tile(plan, w, r0, r1);
  const std::span<float> dequantized = std::span(out.dequantized).subspan(static_cast<std::size_t>(r0 * cols),
                                                                        static_cast<std::size_t>(m * cols));
  Matrix err(m, std::min(plan.o.block_size, cols));
  double loss = 0.0;
  for (std::int64_t i1 = 0; i1 < cols;) {
    const std::int64_t i2 = block_end(plan, i1);
    for (std::int64_t i = i1; i < i2; ++i) {
      if (!plan.o.act_order && i % p.group_size == 0) set_group_scales(p, i, i / p.group_size, tile);
      quantize_column(plan, i, tile, dequantized, err.col(i - i1));
      loss += err.col(i - i1).squaredNorm();
      tile.w.block(0, i + 1, m, i2 - i - 1).noalias() -= err.col(i - i1) * plan.u.row(i).segment(i + 1, i2 - i - 1);
    }
    tile.w.rightCols(cols - i2).noalias() -= err.leftCols(i2 - i1) * plan.u.block(i1, i2, i2 - i1, cols - i2);
    i1 = i2;
  }
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(cols));
  for (std::int64_t r = 0; r < m; ++r) {
    pack_int_row(p, tile.rows[static_cast<std::size_t>(r)], out.packed.data() + rb * static_cast<std::size_t>(r0 + r));
  }
  return loss / 2.0;
}

}  // namespace

Expected<GptqResult> gptq_quantize(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                   std::span<const double> hessian, const GptqOptions& o, ThreadPool* pool) {
  PEREGRINE_RETURN_IF_ERROR(validate(w, rows, cols, hessian, o));
  PEREGRINE_ASSIGN_OR_RETURN(const Plan plan, make_plan(hessian, cols, o));

  GptqResult result;
  const std::size_t rb = *row_bytes(DType::kInt, o.params, static_cast<std::uint64_t>(cols));
  result.packed.resize(rb * static_cast<std::size_t>(rows));
  result.dequantized.resize(w.size());
  result.loss = sum_over_row_tiles(rows, pool, [&](std::int64_t r0, std::int64_t r1) { return quantize_rows(plan, w, r0, r1, result); });
  return result;
}

}  // namespace peregrine

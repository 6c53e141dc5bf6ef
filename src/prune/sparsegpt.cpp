// SparseGPT (Frantar & Alistarh 2023, Algorithm 1) as the reference sparsegpt.py
// (IST-DASLab, SparseGPT.fasterprune) computes it: dead inputs, dampening, U = upper Cholesky
// factor of (H + λI)⁻¹, lazy block updates, adaptive masks; the optional quantizer as its GPTQ
// joint mode. Deviations, on purpose: unstructured masks are chosen per row of a block (the
// reference thresholds the whole block), and with quantization an N:M mask is chosen for a whole
// quantization group at its first column (so the group's scale is that of its kept weights).
#include "peregrine/prune/sparsegpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "peregrine/quant/hessian_factor.h"
#include "peregrine/quant/int_group.h"

namespace peregrine {
namespace {

using Matrix = HessianMatrix;

Status validate(std::span<const float> w, std::int64_t rows, std::int64_t cols, std::span<const double> hessian,
                const SparseGptOptions& o) {
  if (rows < 1 || cols < 1) return invalid_argument("sparsegpt: rows and cols must be >= 1");
  const auto n = static_cast<std::size_t>(cols);
  if (w.size() != static_cast<std::size_t>(rows) * n || hessian.size() != n * n) {
    return invalid_argument("sparsegpt: w must hold rows * cols values and hessian cols² (" + std::to_string(rows) + " x " +
                            std::to_string(cols) + ")");
  }
  PEREGRINE_RETURN_IF_ERROR(o.target.validate());
  if (o.quant && (!o.quant->valid() || o.quant->act_bits != 16)) return invalid_argument("sparsegpt: invalid quantization parameters");
  if (o.quant && o.target.nm() && o.quant->group_size % o.target.m != 0 && o.quant->group_size < cols) {
    return invalid_argument("sparsegpt: quantization group " + std::to_string(o.quant->group_size) + " is not a multiple of M = " +
                            std::to_string(o.target.m));
  }
  if (o.block_size < 1) return invalid_argument("sparsegpt: block_size must be >= 1");
  if (!(o.damp_percent >= 0.0)) return invalid_argument("sparsegpt: damp_percent must be >= 0");
  const auto finite = [](auto v) { return std::isfinite(v); };
  if (!std::all_of(w.begin(), w.end(), finite) || !std::all_of(hessian.begin(), hessian.end(), finite)) {
    return invalid_argument("sparsegpt: non-finite value in w or hessian");
  }
  return Status::ok();
}

/// What every row tile's sweep shares.
struct Plan {
  const SparseGptOptions& o;
  std::int64_t cols;
  std::int64_t mask_unit;   // N:M: columns whose masks are chosen together (m, or the quant group)
  std::int64_t block;       // lazy block: block_size rounded up to a multiple of the units
  std::vector<bool> dead;   // [cols]
  HessianFactor u;          // [cols, cols]
};

Expected<Plan> make_plan(std::span<const double> hessian, std::int64_t cols, const SparseGptOptions& o) {
  auto [h, dead] = live_hessian(hessian, cols);
  PEREGRINE_ASSIGN_OR_RETURN(HessianFactor u, inverse_hessian_factor(h, o.damp_percent, "sparsegpt"));
  const std::int64_t group = o.quant ? std::min(o.quant->group_size, cols) : 1;
  const std::int64_t mask_unit = o.target.nm() ? (o.quant ? group : o.target.m) : 1;
  const std::int64_t unit = std::lcm(mask_unit, group);
  const std::int64_t block = (o.block_size + unit - 1) / unit * unit;
  return Plan{o, cols, mask_unit, block, std::move(dead), std::move(u)};
}

/// One tile of rows: current weights and, with quantization, their codes and group parameters.
struct Tile {
  Matrix w;                        // [m, cols] f64
  std::vector<std::uint8_t> keep;  // [m * cols]
  std::vector<IntRow> rows;        // [m] with quant
};

/// The OBS saliency w² / U_jj² of tile row r over columns [c0, c0 + len).
std::vector<float> saliency(const Plan& plan, const Tile& tile, Eigen::Index r, std::int64_t c0, std::int64_t len) {
  std::vector<float> s(static_cast<std::size_t>(len));
  for (std::int64_t j = 0; j < len; ++j) {
    const double d = plan.u(c0 + j, c0 + j);
    s[static_cast<std::size_t>(j)] = static_cast<float>(tile.w(r, c0 + j) * tile.w(r, c0 + j) / (d * d));
  }
  return s;
}

/// Chooses the masks of columns [c0, c0 + len) of every tile row: N:M per m-group, unstructured
/// the target fraction of the range.
void choose_masks(const Plan& plan, std::int64_t c0, std::int64_t len, Tile& tile) {
  const SparsityTarget& t = plan.o.target;
  const std::int64_t unit = t.nm() ? t.m : len;
  const std::int64_t pruned = t.nm() ? t.m - t.n : std::llround(t.sparsity * static_cast<double>(len));
  for (Eigen::Index r = 0; r < tile.w.rows(); ++r) {
    for (std::int64_t g = c0; g + unit <= c0 + len; g += unit) {  // an N:M tail of < m columns stays
      const auto at = static_cast<std::size_t>(r * plan.cols + g);
      keep_highest(saliency(plan, tile, r, g, unit), pruned, std::span(tile.keep).subspan(at, static_cast<std::size_t>(unit)));
    }
  }
}

/// RTN parameters of quantization group g of every tile row from its kept, error-updated weights.
void set_group_scales(const Plan& plan, std::int64_t g, Tile& tile) {
  const QuantParams& p = *plan.o.quant;
  const std::int64_t first = g * p.group_size, len = std::min(p.group_size, plan.cols - first);
  std::vector<float> values(static_cast<std::size_t>(len));
  for (Eigen::Index r = 0; r < tile.w.rows(); ++r) {
    for (std::int64_t i = 0; i < len; ++i) {
      const bool kept = tile.keep[static_cast<std::size_t>(r * plan.cols + first + i)] != 0;
      values[static_cast<std::size_t>(i)] = kept ? static_cast<float>(tile.w(r, first + i)) : 0.0f;
    }
    tile.rows[static_cast<std::size_t>(r)].groups[static_cast<std::size_t>(g)] = rtn_group_scale(values, p.bits, p.asymmetric);
  }
}

Tile load_tile(const Plan& plan, std::span<const float> w, std::int64_t r0, std::int64_t r1) {
  const std::int64_t m = r1 - r0, cols = plan.cols;
  Tile tile{Matrix(m, cols), std::vector<std::uint8_t>(static_cast<std::size_t>(m * cols), 1), {}};
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) {
      tile.w(r, j) = plan.dead[static_cast<std::size_t>(j)] ? 0.0 : w[static_cast<std::size_t>((r0 + r) * cols + j)];
    }
  }
  if (plan.o.quant) {
    tile.rows.resize(static_cast<std::size_t>(m));
    for (IntRow& row : tile.rows) {
      row.groups.resize(static_cast<std::size_t>(int_group_count(*plan.o.quant, cols)));
      row.codes.resize(static_cast<std::size_t>(cols));
    }
  }
  return tile;
}

/// Prunes / quantizes column i of every tile row into `out` (the tile's rows of the result) and
/// writes the scaled errors (w − ŵ) / U_ii into `err`.
void visit_column(const Plan& plan, std::int64_t i, Tile& tile, std::span<float> out, Eigen::Ref<Eigen::VectorXd> err) {
  const double d = plan.u(i, i);
  for (Eigen::Index r = 0; r < tile.w.rows(); ++r) {
    const auto at = static_cast<std::size_t>(r * plan.cols + i);
    float q = 0.0f;
    if (plan.o.quant) {
      IntRow& row = tile.rows[static_cast<std::size_t>(r)];
      const GroupScale& g = row.groups[static_cast<std::size_t>(i / plan.o.quant->group_size)];
      const int code = tile.keep[at] != 0 ? quantize_code(static_cast<float>(tile.w(r, i)), g, plan.o.quant->bits) : g.zero;
      row.codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(code);
      q = dequantize_code(code, g);
    } else if (tile.keep[at] != 0) {
      q = static_cast<float>(tile.w(r, i));
    }
    out[at] = q;
    err(r) = (tile.w(r, i) - q) / d;
  }
}

/// The sweep of rows [r0, r1): their pruned weights, masks and codes into `result`; returns
/// their share of the proxy loss.
double prune_rows(const Plan& plan, std::span<const float> w, std::int64_t r0, std::int64_t r1, SparseGptResult& result) {
  const std::int64_t m = r1 - r0, cols = plan.cols;
  const auto offset = static_cast<std::size_t>(r0 * cols), len = static_cast<std::size_t>(m * cols);
  Tile tile = load_tile(plan, w, r0, r1);
  const std::span<float> out = std::span(result.weights).subspan(offset, len);
  Matrix err(m, std::min(plan.block, cols));
  double loss = 0.0;
  for (std::int64_t i1 = 0; i1 < cols; i1 += plan.block) {
    const std::int64_t i2 = std::min(cols, i1 + plan.block);
    if (!plan.o.target.nm()) choose_masks(plan, i1, i2 - i1, tile);
    for (std::int64_t i = i1; i < i2; ++i) {
      if (plan.o.target.nm() && i % plan.mask_unit == 0) choose_masks(plan, i, std::min(plan.mask_unit, cols - i), tile);
      if (plan.o.quant && i % plan.o.quant->group_size == 0) set_group_scales(plan, i / plan.o.quant->group_size, tile);
      visit_column(plan, i, tile, out, err.col(i - i1));
      loss += err.col(i - i1).squaredNorm();
      tile.w.block(0, i + 1, m, i2 - i - 1).noalias() -= err.col(i - i1) * plan.u.row(i).segment(i + 1, i2 - i - 1);
    }
    tile.w.rightCols(cols - i2).noalias() -= err.leftCols(i2 - i1) * plan.u.block(i1, i2, i2 - i1, cols - i2);
  }
  std::copy(tile.keep.begin(), tile.keep.end(), result.keep.begin() + static_cast<std::ptrdiff_t>(offset));
  if (plan.o.quant) {
    const std::size_t rb = *row_bytes(DType::kInt, *plan.o.quant, static_cast<std::uint64_t>(cols));
    for (std::int64_t r = 0; r < m; ++r) {
      pack_int_row(*plan.o.quant, tile.rows[static_cast<std::size_t>(r)], result.packed.data() + rb * static_cast<std::size_t>(r0 + r));
    }
  }
  return loss / 2.0;
}

}  // namespace

Expected<SparseGptResult> sparsegpt_prune(std::span<const float> w, std::int64_t rows, std::int64_t cols,
                                          std::span<const double> hessian, const SparseGptOptions& o, ThreadPool* pool) {
  PEREGRINE_RETURN_IF_ERROR(validate(w, rows, cols, hessian, o));
  SparseGptOptions clamped = o;
  if (clamped.quant) clamped.quant->group_size = std::min(clamped.quant->group_size, cols);
  PEREGRINE_ASSIGN_OR_RETURN(const Plan plan, make_plan(hessian, cols, clamped));
  SparseGptResult result;
  result.weights.resize(w.size());
  result.keep.resize(w.size());
  if (clamped.quant) result.packed.resize(*row_bytes(DType::kInt, *clamped.quant, static_cast<std::uint64_t>(cols)) * static_cast<std::size_t>(rows));
  result.loss = sum_over_row_tiles(rows, pool, [&](std::int64_t r0, std::int64_t r1) { return prune_rows(plan, w, r0, r1, result); });
  return result;
}

}  // namespace peregrine

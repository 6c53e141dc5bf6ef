#include "peregrine/prune/width_prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace peregrine {
namespace {

// ‖W[:, j]‖₂ · ‖X_j‖₂ for every input column j of the linear `name` of layer l.
std::vector<double> column_importance(const FloatModel& fm, std::int64_t l, const char* name, const InputStats& s) {
  const std::string full = layer_tensor_name(l, name);
  const auto w = fm.tensor(full);
  const std::int64_t cols = fm.shape(full).back(), rows = static_cast<std::int64_t>(w.size()) / cols;
  std::vector<double> sq(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const double v = w[static_cast<std::size_t>(r * cols + j)];
      sq[static_cast<std::size_t>(j)] += v * v;
    }
  }
  const std::vector<float> x = s.l2_norm();
  for (std::size_t j = 0; j < sq.size(); ++j) sq[j] = std::sqrt(sq[j]) * x[j];
  return sq;
}

// Sums of `importance` over consecutive units of `unit` entries.
std::vector<double> per_unit(const std::vector<double>& importance, std::int64_t unit) {
  std::vector<double> out(importance.size() / static_cast<std::size_t>(unit));
  for (std::size_t i = 0; i < importance.size(); ++i) out[i / static_cast<std::size_t>(unit)] += importance[i];
  return out;
}

// Indices of the max(1, round(keep · n)) highest values, increasing.
std::vector<std::int64_t> keep_top(const std::vector<double>& importance, double keep) {
  const auto n = static_cast<std::int64_t>(importance.size());
  const std::int64_t k = std::max<std::int64_t>(1, std::llround(keep * static_cast<double>(n)));
  std::vector<std::int64_t> order(importance.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    return importance[static_cast<std::size_t>(a)] > importance[static_cast<std::size_t>(b)];
  });
  order.resize(static_cast<std::size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

// Keeps the rows of units `kept` (each `unit` rows) of tensor `name` (a matrix or a vector).
void keep_rows(FloatModel& fm, const std::string& name, const std::vector<std::int64_t>& kept, std::int64_t unit) {
  if (!fm.has(name)) return;
  std::vector<std::int64_t> shape = fm.shape(name);
  const std::int64_t cols = shape.size() == 2 ? shape.back() : 1;
  const auto src = fm.tensor(name);
  std::vector<float> out;
  for (std::int64_t u : kept) {
    const auto first = static_cast<std::size_t>(u * unit * cols), len = static_cast<std::size_t>(unit * cols);
    out.insert(out.end(), src.begin() + static_cast<std::ptrdiff_t>(first), src.begin() + static_cast<std::ptrdiff_t>(first + len));
  }
  shape.front() = static_cast<std::int64_t>(kept.size()) * unit;
  fm.set(name, std::move(shape), std::move(out));
}

// Keeps the columns of units `kept` (each `unit` columns) of matrix `name`.
void keep_columns(FloatModel& fm, const std::string& name, const std::vector<std::int64_t>& kept, std::int64_t unit) {
  std::vector<std::int64_t> shape = fm.shape(name);
  const std::int64_t cols = shape.back(), rows = shape.front();
  const auto src = fm.tensor(name);
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(rows) * kept.size() * static_cast<std::size_t>(unit));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t u : kept) {
      const auto first = src.begin() + static_cast<std::ptrdiff_t>(r * cols + u * unit);
      out.insert(out.end(), first, first + unit);
    }
  }
  shape.back() = static_cast<std::int64_t>(kept.size()) * unit;
  fm.set(name, std::move(shape), std::move(out));
}

std::string tensor(std::int64_t l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

}  // namespace

Expected<WidthPlan> choose_width(const FloatModel& fm, const std::vector<LayerStats>& stats, double ffn_keep,
                                 double heads_keep) {
  const ModelConfig& c = fm.config();
  if (static_cast<std::int64_t>(stats.size()) != c.n_layers) return invalid_argument("width: one statistics entry per layer needed");
  WidthPlan plan;
  const std::int64_t rep = c.n_heads / c.n_kv_heads;
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::string q_norm = tensor(l, "attn_q_norm.weight");
    if (fm.has(q_norm) && static_cast<std::int64_t>(fm.tensor(q_norm).size()) != c.head_dim) {
      return unsupported("width: " + q_norm + " normalizes the whole projection, which mixes the heads; pruning heads would change it");
    }
    if (!fm.has(layer_tensor_name(l, "ffn_down"))) return unsupported("width: layer " + std::to_string(l) + " has no dense FFN (MoE)");
    const auto& ls = stats[static_cast<std::size_t>(l)];
    if (ls[static_cast<std::size_t>(LinearInput::kFfnDown)].sq_sum.empty()) return invalid_argument("width: statistics without input norms");
    plan.ffn_channels.push_back(
        keep_top(column_importance(fm, l, "ffn_down", ls[static_cast<std::size_t>(LinearInput::kFfnDown)]), ffn_keep));
    const auto heads = column_importance(fm, l, "attn_output", ls[static_cast<std::size_t>(LinearInput::kAttentionOutput)]);
    plan.kv_heads.push_back(keep_top(per_unit(heads, rep * c.head_dim), heads_keep));
  }
  return plan;
}

Status apply_width(FloatModel& fm, const WidthPlan& plan) {
  ModelConfig& c = fm.config();
  if (static_cast<std::int64_t>(plan.ffn_channels.size()) != c.n_layers ||
      static_cast<std::int64_t>(plan.kv_heads.size()) != c.n_layers) {
    return invalid_argument("width: the plan does not have one entry per layer");
  }
  const std::int64_t rep = c.n_heads / c.n_kv_heads, hd = c.head_dim;
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const auto& ffn = plan.ffn_channels[static_cast<std::size_t>(l)];
    const auto& groups = plan.kv_heads[static_cast<std::size_t>(l)];
    for (const char* name : {"ffn_gate.weight", "ffn_up.weight"}) keep_rows(fm, tensor(l, name), ffn, 1);
    keep_columns(fm, tensor(l, "ffn_down.weight"), ffn, 1);
    for (const char* name : {"attn_q.weight", "attn_q.bias"}) keep_rows(fm, tensor(l, name), groups, rep * hd);
    for (const char* name : {"attn_k.weight", "attn_k.bias", "attn_v.weight", "attn_v.bias"}) keep_rows(fm, tensor(l, name), groups, hd);
    keep_columns(fm, tensor(l, "attn_output.weight"), groups, rep * hd);
  }
  c.ffn_dim = static_cast<std::int64_t>(plan.ffn_channels.front().size());
  c.n_kv_heads = static_cast<std::int64_t>(plan.kv_heads.front().size());
  c.n_heads = c.n_kv_heads * rep;
  return Status::ok();
}

}  // namespace peregrine

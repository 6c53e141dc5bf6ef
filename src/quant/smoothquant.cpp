#include "peregrine/quant/smoothquant.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace peregrine {
namespace {

constexpr float kMinScale = 1e-5f, kMaxScale = 1e5f;

Status check_inputs(std::span<const float> act_abs_max, std::span<const std::span<const float>> ws,
                    std::span<const std::int64_t> rows, std::int64_t cols, float alpha) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) {
    return invalid_argument("smoothquant: alpha " + std::to_string(alpha) + " outside [0, 1]");
  }
  if (ws.empty()) return invalid_argument("smoothquant: no weight matrices");
  if (cols < 1 || static_cast<std::int64_t>(act_abs_max.size()) != cols) {
    return invalid_argument("smoothquant: " + std::to_string(act_abs_max.size()) + " activation maxima for " +
                            std::to_string(cols) + " input channels");
  }
  if (rows.size() != ws.size()) {
    return invalid_argument("smoothquant: " + std::to_string(ws.size()) + " matrices but " +
                            std::to_string(rows.size()) + " row counts");
  }
  for (std::size_t i = 0; i < ws.size(); ++i) {
    if (rows[i] < 1 || static_cast<std::int64_t>(ws[i].size()) != rows[i] * cols) {
      return invalid_argument("smoothquant: matrix " + std::to_string(i) + " has " + std::to_string(ws[i].size()) +
                              " values, not " + std::to_string(rows[i]) + " x " + std::to_string(cols));
    }
    if (!std::all_of(ws[i].begin(), ws[i].end(), [](float v) { return std::isfinite(v); })) {
      return invalid_argument("smoothquant: matrix " + std::to_string(i) + " has non-finite weights");
    }
  }
  for (const float a : act_abs_max) {
    if (!std::isfinite(a) || a < 0.0f) {
      return invalid_argument("smoothquant: activation maximum " + std::to_string(a) + " is not finite and >= 0");
    }
  }
  return Status::ok();
}

// max |W[r, j]| over every row r of every matrix, per column j.
std::vector<float> weight_abs_max(std::span<const std::span<const float>> ws, std::int64_t cols) {
  std::vector<float> m(static_cast<std::size_t>(cols), 0.0f);
  for (const auto& w : ws) {
    for (std::size_t i = 0; i < w.size(); ++i) m[i % m.size()] = std::max(m[i % m.size()], std::fabs(w[i]));
  }
  return m;
}

}  // namespace

Expected<std::vector<float>> smoothquant_scales(std::span<const float> act_abs_max,
                                                std::span<const std::span<const float>> ws,
                                                std::span<const std::int64_t> rows, std::int64_t cols,
                                                float alpha) {
  PEREGRINE_RETURN_IF_ERROR(check_inputs(act_abs_max, ws, rows, cols, alpha));
  const std::vector<float> w_max = weight_abs_max(ws, cols);
  std::vector<float> s(static_cast<std::size_t>(cols), 1.0f);
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (act_abs_max[j] == 0.0f || w_max[j] == 0.0f) continue;
    const double sj = std::pow(static_cast<double>(act_abs_max[j]), alpha) /
                      std::pow(static_cast<double>(w_max[j]), 1.0 - alpha);
    s[j] = static_cast<float>(std::clamp(sj, static_cast<double>(kMinScale), static_cast<double>(kMaxScale)));
  }
  return s;
}

}  // namespace peregrine

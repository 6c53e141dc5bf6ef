// Scalar reference twin of the attention kernels (attention.h): K/V rows widened to f32 with
// quant/dequantize, scores materialized (scale, soft-capping), two-pass softmax, f64
// accumulation. Tests compare attention_prefill (causal or tree-masked, with or without a
// sliding window) / attention_decode against it.
#include <cmath>
#include <span>
#include <vector>

#include "peregrine/kernels/cpu/attention/attention.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

// Positions [0, n_ctx) of `view` as f32 rows [n_ctx, kv_dim].
std::vector<float> widen_rows(const KvLayerView& view, std::int64_t n_ctx, std::int64_t kv_dim) {
  std::vector<float> rows(static_cast<std::size_t>(n_ctx * kv_dim));
  for (std::int64_t t = 0; t < n_ctx; ++t) {
    dequantize(view.dtype, view.row(t), std::span<float>(rows).subspan(static_cast<std::size_t>(t * kv_dim), static_cast<std::size_t>(kv_dim)));
  }
  return rows;
}

}  // namespace

void attention_row_reference(const float* q, const KvLayerView& k_view, const KvLayerView& v_view,
                             std::int64_t n_ctx, const AttentionShape& s, float* out,
                             const std::uint8_t* visible) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim, kv_dim = s.n_kv_heads * hd;
  const std::vector<float> k = widen_rows(k_view, n_ctx, kv_dim), v = widen_rows(v_view, n_ctx, kv_dim);
  const double scale = s.scale > 0.0f ? s.scale : 1.0 / std::sqrt(static_cast<double>(hd)), cap = s.softcap;
  // The sliding window of a row at position n_ctx - 1: positions [n_ctx - window, n_ctx).
  const auto sees = [&](std::int64_t t) {
    if (visible != nullptr) return visible[t] != 0;
    return s.window <= 0 || t >= n_ctx - s.window;
  };
  std::vector<double> scores(static_cast<std::size_t>(n_ctx));
  for (std::int64_t h = 0; h < s.n_heads; ++h) {
    const std::int64_t kv_off = (h / group) * hd;
    double max_score = -INFINITY;
    for (std::int64_t t = 0; t < n_ctx; ++t) {
      double dot = 0.0;
      for (std::int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[h * hd + d]) * k[t * kv_dim + kv_off + d];
      const double x = dot * scale;
      scores[t] = !sees(t) ? -INFINITY : cap > 0.0 ? cap * std::tanh(x / cap) : x;
      max_score = std::max(max_score, scores[t]);
    }
    double sum = 0.0;
    for (auto& sc : scores) sum += (sc = std::exp(sc - max_score));
    for (std::int64_t d = 0; d < hd; ++d) {
      double acc = 0.0;
      for (std::int64_t t = 0; t < n_ctx; ++t) acc += scores[t] * v[t * kv_dim + kv_off + d];
      out[h * hd + d] = static_cast<float>(acc / sum);
    }
  }
}

}  // namespace peregrine

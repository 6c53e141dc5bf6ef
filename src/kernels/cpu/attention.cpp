#include "peregrine/kernels/cpu/attention.h"

#include <cmath>
#include <vector>

namespace peregrine {

void attention_row(const float* q, const float* k, const float* v, std::int64_t n_ctx,
                   const AttentionShape& s, float* out) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (std::int64_t h = 0; h < s.n_heads; ++h) {
    const float* qh = q + h * hd;
    const std::int64_t kv_off = (h / group) * hd;
    float* acc = out + h * hd;
    for (std::int64_t d = 0; d < hd; ++d) acc[d] = 0.0f;
    float running_max = -INFINITY, running_sum = 0.0f;
    for (std::int64_t t = 0; t < n_ctx; ++t) {
      const float* kt = k + t * s.kv_stride + kv_off;
      float score = 0.0f;
      for (std::int64_t d = 0; d < hd; ++d) score += qh[d] * kt[d];
      score *= scale;
      const float new_max = std::max(running_max, score);
      const float correction = std::exp(running_max - new_max);
      const float p = std::exp(score - new_max);
      const float* vt = v + t * s.kv_stride + kv_off;
      for (std::int64_t d = 0; d < hd; ++d) acc[d] = acc[d] * correction + p * vt[d];
      running_sum = running_sum * correction + p;
      running_max = new_max;
    }
    for (std::int64_t d = 0; d < hd; ++d) acc[d] /= running_sum;
  }
}

void attention_row_reference(const float* q, const float* k, const float* v,
                             std::int64_t n_ctx, const AttentionShape& s, float* out) {
  const std::int64_t group = s.n_heads / s.n_kv_heads, hd = s.head_dim;
  std::vector<double> scores(static_cast<std::size_t>(n_ctx));
  for (std::int64_t h = 0; h < s.n_heads; ++h) {
    const std::int64_t kv_off = (h / group) * hd;
    double max_score = -INFINITY;
    for (std::int64_t t = 0; t < n_ctx; ++t) {
      double dot = 0.0;
      for (std::int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[h * hd + d]) * k[t * s.kv_stride + kv_off + d];
      scores[t] = dot / std::sqrt(static_cast<double>(hd));
      max_score = std::max(max_score, scores[t]);
    }
    double sum = 0.0;
    for (auto& sc : scores) sum += (sc = std::exp(sc - max_score));
    for (std::int64_t d = 0; d < hd; ++d) {
      double acc = 0.0;
      for (std::int64_t t = 0; t < n_ctx; ++t) acc += scores[t] * v[t * s.kv_stride + kv_off + d];
      out[h * hd + d] = static_cast<float>(acc / sum);
    }
  }
}

}  // namespace peregrine

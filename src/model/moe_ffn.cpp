#include "peregrine/model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "peregrine/kernels/cpu/elementwise/elementwise.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {


float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

using Activation = void (*)(float* gate, const float* up, std::int64_t n);

// One SwiGLU FFN over the m rows of x ([m, dim]) into y ([m, dim]): products by `mm`, the
// gating by `act` (swiglu or its reference twin).
template <typename Product>
void swiglu_ffn(const TensorView& gate, const TensorView& up, const TensorView& down, std::span<const float> x, std::int64_t m,
                std::span<float> y, Product mm, Activation act) {
  const std::int64_t ffn = gate.n_rows();
  std::vector<float> g(static_cast<std::size_t>(m * ffn)), u(g.size());
  mm(gate, x, m, std::span<float>(g));
  mm(up, x, m, std::span<float>(u));
  act(g.data(), u.data(), static_cast<std::int64_t>(g.size()));
  mm(down, std::span<const float>(g), m, y);
}

// out[t, :] += sigmoid(shared_expert_gate · x[t, :]) · FFN_shared(x[t, :]) for the n rows.
template <typename Product>
void add_shared_expert(const MoeWeights& w, std::span<const float> x, std::int64_t n, std::span<float> out, Product mm,
                       Activation act) {
  if (w.shared_gate == nullptr) return;
  const std::int64_t dim = w.router->row_length();
  std::vector<float> y(out.size());
  swiglu_ffn(*w.shared_gate, *w.shared_up, *w.shared_down, x, n, y, mm, act);
  for (std::int64_t t = 0; t < n; ++t) {
    const float* xt = &x[t * dim];
    const float s = sigmoid(std::inner_product(xt, xt + dim, w.shared_expert_gate.begin(), 0.0f));
    for (std::int64_t i = 0; i < dim; ++i) out[t * dim + i] += s * y[t * dim + i];
  }
}

// out += Σ_j weight_j · FFN_{expert_j}(x) for one token x [dim] (decode) and its k chosen
// experts, taken in expert order as the grouped path of moe_ffn adds them: every gate and up
// product in one matmul_fused call on x, every down product on its own hidden row in a
// second, so two parallel regions instead of 3·k (and one quantization of x for Q4_0).
void add_experts_of_one_token(const MoeWeights& w, std::span<const float> x, std::span<const std::int32_t> expert,
                              std::span<const float> weight, std::span<float> out, ThreadPool& pool,
                              ForwardCounters* counters, std::int64_t layer) {
  const auto k = static_cast<std::int64_t>(expert.size()), dim = static_cast<std::int64_t>(x.size());
  const std::int64_t ffn = w.gate[expert[0]]->n_rows();
  std::vector<std::pair<std::int32_t, float>> chosen;
  for (std::int64_t j = 0; j < k; ++j) chosen.emplace_back(expert[j], weight[j]);
  std::sort(chosen.begin(), chosen.end());
  std::vector<float> g(static_cast<std::size_t>(k * ffn)), u(g.size()), y(static_cast<std::size_t>(k * dim));
  const auto row = [](std::vector<float>& v, std::int64_t j, std::int64_t len) {
    return std::span<float>(v).subspan(static_cast<std::size_t>(j * len), static_cast<std::size_t>(len));
  };
  std::vector<MatmulProduct> gate_up, down;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::int32_t e = chosen[static_cast<std::size_t>(j)].first;
    gate_up.push_back({w.gate[e], x, row(g, j, ffn)});
    gate_up.push_back({w.up[e], x, row(u, j, ffn)});
    down.push_back({w.down[e], row(g, j, ffn), row(y, j, dim)});
    if (counters) {
      counters->add_expert_tokens(layer, e, 1);
      for (const TensorView* m : {w.gate[e], w.up[e], w.down[e]}) counters->add_weight_bytes(m->nbytes);
    }
  }
  matmul_fused(gate_up, 1, pool);
  swiglu(g.data(), u.data(), static_cast<std::int64_t>(g.size()));
  matmul_fused(down, 1, pool);
  for (std::int64_t j = 0; j < k; ++j) {
    const float s = chosen[static_cast<std::size_t>(j)].second;
    for (std::int64_t i = 0; i < dim; ++i) out[i] += s * y[j * dim + i];
  }
}

}  // namespace

MoeWeights moe_layer_weights(const ModelFile& f, std::int64_t layer) {
  const ModelConfig& c = f.config;
  MoeWeights w;
  if (c.n_experts == 0) return w;
  w.router = f.find(layer_tensor_name(layer, "ffn_gate_inp"));
  for (std::int64_t e = 0; e < c.n_experts; ++e) {
    w.gate.push_back(f.find(expert_tensor_name(layer, "ffn_gate", e)));
    w.up.push_back(f.find(expert_tensor_name(layer, "ffn_up", e)));
    w.down.push_back(f.find(expert_tensor_name(layer, "ffn_down", e)));
  }
  w.shared_gate = f.find(layer_tensor_name(layer, "ffn_gate_shexp"));
  w.shared_up = f.find(layer_tensor_name(layer, "ffn_up_shexp"));
  w.shared_down = f.find(layer_tensor_name(layer, "ffn_down_shexp"));
  if (const TensorView* g = f.find(layer_tensor_name(layer, "ffn_gate_inp_shexp"))) {
    w.shared_expert_gate.resize(static_cast<std::size_t>(g->numel()));
    dequantize(g->dtype, g->data, w.shared_expert_gate);
  }
  w.top_k = c.n_experts_used;
  w.normalize = c.expert_weights_norm;
  return w;
}

void route_top_k(std::span<const float> logits, std::int64_t n, std::int64_t n_experts, std::int64_t k, bool normalize,
                 std::span<std::int32_t> expert, std::span<float> weight) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(n_experts));
  for (std::int64_t t = 0; t < n; ++t) {
    const float* l = &logits[t * n_experts];
    const float max = *std::max_element(l, l + n_experts);
    double sum = 0.0;
    for (std::int64_t e = 0; e < n_experts; ++e) sum += std::exp(static_cast<double>(l[e] - max));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [l](std::int32_t a, std::int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    double kept = 0.0;
    for (std::int64_t j = 0; j < k; ++j) kept += std::exp(static_cast<double>(l[order[j]] - max));
    const double denom = normalize ? kept : sum;
    for (std::int64_t j = 0; j < k; ++j) {
      expert[t * k + j] = order[j];
      weight[t * k + j] = static_cast<float>(std::exp(static_cast<double>(l[order[j]] - max)) / denom);
    }
  }
}

void moe_ffn(const MoeWeights& w, std::span<const float> x, std::int64_t n, std::span<float> out, ThreadPool& pool,
             ForwardCounters* counters, std::int64_t layer) {
  const std::int64_t n_experts = w.router->n_rows(), dim = w.router->row_length(), k = w.top_k;
  auto mm = [&](const TensorView& m, std::span<const float> in, std::int64_t rows, std::span<float> y) {
    matmul(m, in, rows, y, pool);
    if (counters) counters->add_weight_bytes(m.nbytes);
  };
  std::vector<float> logits(static_cast<std::size_t>(n * n_experts));
  mm(*w.router, x, n, logits);
  std::vector<std::int32_t> expert(static_cast<std::size_t>(n * k));
  std::vector<float> weight(expert.size());
  route_top_k(logits, n, n_experts, k, w.normalize, expert, weight);
  std::fill(out.begin(), out.end(), 0.0f);
  if (n == 1) {
    add_experts_of_one_token(w, x, expert, weight, out, pool, counters, layer);
    return add_shared_expert(w, x, n, out, mm, swiglu);
  }
  // Each expert's (token, weight) pairs, in token order.
  std::vector<std::vector<std::pair<std::int64_t, float>>> routed(static_cast<std::size_t>(n_experts));
  for (std::int64_t i = 0; i < n * k; ++i) routed[expert[i]].emplace_back(i / k, weight[i]);
  std::vector<float> xe, ye;
  for (std::int64_t e = 0; e < n_experts; ++e) {
    const auto& rows = routed[e];
    if (rows.empty()) continue;
    if (counters) counters->add_expert_tokens(layer, e, rows.size());
    const auto m = static_cast<std::int64_t>(rows.size());
    xe.resize(static_cast<std::size_t>(m * dim));
    ye.resize(xe.size());
    for (std::int64_t r = 0; r < m; ++r) std::copy_n(&x[rows[r].first * dim], dim, &xe[r * dim]);
    swiglu_ffn(*w.gate[e], *w.up[e], *w.down[e], xe, m, ye, mm, swiglu);
    for (std::int64_t r = 0; r < m; ++r) {
      float* o = &out[rows[r].first * dim];
      const float s = rows[r].second;
      for (std::int64_t i = 0; i < dim; ++i) o[i] += s * ye[r * dim + i];
    }
  }
  add_shared_expert(w, x, n, out, mm, swiglu);
}

void moe_ffn_reference(const MoeWeights& w, std::span<const float> x, std::int64_t n, std::span<float> out) {
  const std::int64_t n_experts = w.router->n_rows(), dim = w.router->row_length(), k = w.top_k;
  auto mm = [](const TensorView& m, std::span<const float> in, std::int64_t rows, std::span<float> y) {
    matmul_reference(m, in, rows, y);
  };
  std::vector<float> logits(static_cast<std::size_t>(n_experts)), y(static_cast<std::size_t>(dim));
  std::vector<std::int32_t> expert(static_cast<std::size_t>(k));
  std::vector<float> weight(expert.size());
  for (std::int64_t t = 0; t < n; ++t) {
    const std::span<const float> xt = x.subspan(static_cast<std::size_t>(t * dim), static_cast<std::size_t>(dim));
    mm(*w.router, xt, 1, logits);
    route_top_k(logits, 1, n_experts, k, w.normalize, expert, weight);
    float* o = &out[t * dim];
    std::fill_n(o, dim, 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      swiglu_ffn(*w.gate[expert[j]], *w.up[expert[j]], *w.down[expert[j]], xt, 1, y, mm, swiglu_reference);
      for (std::int64_t i = 0; i < dim; ++i) o[i] += weight[j] * y[i];
    }
  }
  add_shared_expert(w, x, n, out, mm, swiglu_reference);
}

}  // namespace peregrine

#include "peregrine/spec/eagle_layer.h"

#include <algorithm>
#include <string>

#include "peregrine/kernels/cpu/attention/attention.h"
#include "peregrine/kernels/cpu/elementwise/elementwise.h"
#include "peregrine/kernels/cpu/matmul/matmul.h"
#include "peregrine/model/batch_kv_plan.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

TensorView f32_view(const EagleHead& h, const std::string& name) {
  const std::vector<std::int64_t> shape = h.shape(name);
  return f32_matrix_view(name, h.tensors.at(name), shape[0], shape[1]);
}

void add_rows(std::span<float> y, std::span<const float> x) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += x[i];
}

}  // namespace

Expected<std::unique_ptr<EagleLayer>> EagleLayer::create(EagleHead head, const LlamaModel& target) {
  const ModelConfig& t = target.config();
  if (head.hidden != t.dim || head.vocab != t.vocab_size) {
    return invalid_argument("the EAGLE head is for hidden size " + std::to_string(head.hidden) + " and " +
                            std::to_string(head.vocab) + " tokens, the target has " + std::to_string(t.dim) + " and " +
                            std::to_string(t.vocab_size));
  }
  PEREGRINE_RETURN_IF_ERROR(head.validate());
  std::unique_ptr<EagleLayer> e(new EagleLayer(std::move(head)));
  const EagleHead& h = e->head_;
  ModelConfig& c = e->config_;
  c = t;
  c.n_layers = 1;
  c.n_heads = h.heads;
  c.n_kv_heads = h.kv_heads;
  c.head_dim = h.head_dim;
  c.ffn_dim = h.intermediate;
  c.max_seq_len = std::min(t.max_seq_len, h.max_positions);
  c.rope_theta = h.rope_theta;
  c.rms_eps = h.rms_eps;
  c.rope_style = RopeStyle::kNeox;
  c.sliding_window = 0;
  const std::string l = "layers.0.";
  e->fc_ = f32_view(h, "fc.weight");
  e->wq_ = f32_view(h, l + "self_attn.q_proj.weight");
  e->wk_ = f32_view(h, l + "self_attn.k_proj.weight");
  e->wv_ = f32_view(h, l + "self_attn.v_proj.weight");
  e->wo_ = f32_view(h, l + "self_attn.o_proj.weight");
  e->gate_ = f32_view(h, l + "mlp.gate_proj.weight");
  e->up_ = f32_view(h, l + "mlp.up_proj.weight");
  e->down_ = f32_view(h, l + "mlp.down_proj.weight");
  e->fc_bias_ = h.bias ? &h.tensors.at("fc.bias") : nullptr;
  e->post_norm_ = &h.tensors.at(l + "post_attention_layernorm.weight");
  e->embedding_ = target.file().find("token_embd.weight");
  e->lm_head_ = target.file().find(t.tied_embeddings ? "token_embd.weight" : "output.weight");
  if (e->embedding_ == nullptr || e->lm_head_ == nullptr) return invalid_argument("the target has no token embedding or LM head");
  return e;
}

Expected<std::vector<EagleLayer::Run>> EagleLayer::runs(const Batch& batch, std::span<const float> features,
                                                          const KvCache& cache) const {
  const std::int64_t n = batch.size();
  if (n < 1 || static_cast<std::int64_t>(features.size()) != n * config_.dim || static_cast<std::int64_t>(batch.positions.size()) != n ||
      static_cast<std::int64_t>(batch.seq_ids.size()) != n || static_cast<std::int64_t>(batch.need_logits.size()) != n) {
    return invalid_argument("EAGLE forward: a batch of " + std::to_string(n) + " rows needs as many positions, sequences and " +
                            "features of the hidden size");
  }
  if (cache.n_layers() < 1 || cache.kv_dim() != config_.n_kv_heads * config_.head_dim) {
    return invalid_argument("EAGLE forward: the KV cache is not of the head's shape");
  }
  std::vector<Run> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t token = batch.tokens[static_cast<std::size_t>(i)], pos = batch.positions[static_cast<std::size_t>(i)];
    if (token < 0 || token >= config_.vocab_size) return out_of_range("EAGLE forward: token id " + std::to_string(token) + " outside the vocabulary");
    if (pos < 0 || pos >= config_.max_seq_len) return out_of_range("EAGLE forward: position " + std::to_string(pos) + " outside the context");
    const std::int32_t seq = batch.seq_ids[static_cast<std::size_t>(i)];
    if (!out.empty() && out.back().seq == seq) {
      if (pos != batch.positions[static_cast<std::size_t>(i - 1)] + 1) return invalid_argument("EAGLE forward: a sequence's rows must be consecutive positions");
      out.back().end = i + 1;
      continue;
    }
    if (std::any_of(out.begin(), out.end(), [&](const Run& r) { return r.seq == seq; })) {
      return invalid_argument("EAGLE forward: the rows of sequence " + std::to_string(seq) + " are not contiguous");
    }
    out.push_back({seq, i, i + 1});
  }
  if (!batch.kv_planned || !batch_kv_covered(batch, cache)) {
    return invalid_argument("EAGLE forward: the batch's KV slots are not planned in the cache (plan_batch_kv)");
  }
  return out;
}

// x [n, dim] in, h = x + o_proj(attention) out (in x).
void EagleLayer::attention(const Batch& batch, const std::vector<Run>& runs, std::vector<float>& x, KvCache& cache,
                           ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const std::int64_t n = batch.size(), hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd;
  std::vector<float> q(static_cast<std::size_t>(n * q_dim)), k(static_cast<std::size_t>(n * kv_dim)), v(k.size());
  matmul_fused(std::vector<MatmulProduct>{{&wq_, x, q}, {&wk_, x, k}, {&wv_, x, v}}, n, pool);
  std::vector<float> cos(static_cast<std::size_t>(hd)), sin(cos.size()), attn(q.size());
  const AttentionShape shape{c.n_heads, c.n_kv_heads, hd, 0, 0.0f, 0.0f};
  for (const Run& r : runs) {
    const std::int64_t first = batch.positions[static_cast<std::size_t>(r.begin)], rows = r.end - r.begin;
    for (std::int64_t i = r.begin; i < r.end; ++i) {
      rope_table(batch.positions[static_cast<std::size_t>(i)], hd, c.rope_theta, c.rope_style, cos.data(), sin.data());
      rope_rotate(&q[static_cast<std::size_t>(i * q_dim)], c.n_heads, hd, cos.data(), sin.data(), c.rope_style);
      rope_rotate(&k[static_cast<std::size_t>(i * kv_dim)], c.n_kv_heads, hd, cos.data(), sin.data(), c.rope_style);
      cache.write(r.seq, 0, batch.positions[static_cast<std::size_t>(i)], &k[static_cast<std::size_t>(i * kv_dim)],
                  &v[static_cast<std::size_t>(i * kv_dim)]);
    }
    const KvLayerView kv_k = cache.k_view(r.seq, 0), kv_v = cache.v_view(r.seq, 0);
    float* out = &attn[static_cast<std::size_t>(r.begin * q_dim)];
    if (rows > 1) {
      attention_prefill(&q[static_cast<std::size_t>(r.begin * q_dim)], kv_k, kv_v, first, rows, shape, out, pool);
    } else {
      attention_decode(&q[static_cast<std::size_t>(r.begin * q_dim)], kv_k, kv_v, first + 1, shape, out, pool);
    }
  }
  std::vector<float> o(x.size());
  matmul(wo_, attn, n, o, pool);
  add_rows(x, o);
}

Status EagleLayer::forward(const Batch& batch, std::span<const float> features, KvCache& cache, std::vector<float>& logits,
                           std::vector<float>& out_features, ThreadPool& pool) const {
  PEREGRINE_ASSIGN_OR_RETURN(const std::vector<Run> rs, runs(batch, features, cache));
  const ModelConfig& c = config_;
  const std::int64_t n = batch.size(), d = c.dim;
  const auto ud = static_cast<std::size_t>(d);
  std::vector<float> in(static_cast<std::size_t>(n) * 2 * ud);  // [n, 2d]: embed(x_{p+1}), f_p
  for (std::int64_t i = 0; i < n; ++i) {
    const auto row = std::span(in).subspan(static_cast<std::size_t>(i) * 2 * ud, 2 * ud);
    dequantize_row(*embedding_, batch.tokens[static_cast<std::size_t>(i)], row.first(ud));
    std::copy_n(features.begin() + i * d, d, row.begin() + d);
  }
  std::vector<float> x(static_cast<std::size_t>(n) * ud);
  matmul(fc_, in, n, x, pool);
  if (fc_bias_ != nullptr) {
    for (std::int64_t i = 0; i < n; ++i) add_rows(std::span(x).subspan(static_cast<std::size_t>(i) * ud, ud), *fc_bias_);
  }
  attention(batch, rs, x, cache, pool);
  std::vector<float> normed(x.size()), gate(static_cast<std::size_t>(n * c.ffn_dim)), up(gate.size());
  for (std::int64_t i = 0; i < n; ++i) rmsnorm(&x[static_cast<std::size_t>(i * d)], post_norm_->data(), &normed[static_cast<std::size_t>(i * d)], d, c.rms_eps);
  matmul_fused(std::vector<MatmulProduct>{{&gate_, normed, gate}, {&up_, normed, up}}, n, pool);
  gated_activation(FfnActivation::kSilu, gate.data(), up.data(), static_cast<std::int64_t>(gate.size()));
  matmul(down_, gate, n, normed, pool);
  add_rows(x, normed);
  out_features = std::move(x);
  std::vector<float> heads;  // the rows that want logits
  for (std::int64_t i = 0; i < n; ++i) {
    if (batch.need_logits[static_cast<std::size_t>(i)] == 0) continue;
    heads.insert(heads.end(), out_features.begin() + i * d, out_features.begin() + (i + 1) * d);
  }
  const std::int64_t n_out = static_cast<std::int64_t>(heads.size()) / d;
  logits.resize(static_cast<std::size_t>(n_out * c.vocab_size));
  if (n_out > 0) matmul(*lm_head_, heads, n_out, logits, pool);
  return Status::ok();
}

}  // namespace peregrine

#include "peregrine/model/llama_model.h"

#include <map>

#include "peregrine/kernels/cpu/attention.h"
#include "peregrine/kernels/cpu/elementwise.h"
#include "peregrine/kernels/cpu/matmul.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine {
namespace {

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  dequantize(t.dtype, t.data, out);
  return out;
}

const TensorView& get(const ModelFile& f, std::int64_t layer, const char* name) {
  return *f.find(layer_tensor_name(layer, name));
}

}  // namespace

/// Activations of one forward, [n_rows, width] row-major f32 each.
struct LlamaModel::Scratch {
  Scratch(const ModelConfig& c, std::int64_t n)
      : n(n),
        x(static_cast<std::size_t>(n * c.dim)),
        xb(x.size()),
        q(static_cast<std::size_t>(n * c.n_heads * c.head_dim)),
        k(static_cast<std::size_t>(n * c.n_kv_heads * c.head_dim)),
        v(k.size()),
        attn(q.size()),
        gate(static_cast<std::size_t>(n * c.ffn_dim)),
        up(gate.size()) {}
  std::int64_t n;
  std::vector<float> x, xb, q, k, v, attn, gate, up;
};

Expected<LlamaModel> LlamaModel::create(ModelFile file) {
  PEREGRINE_RETURN_IF_ERROR(validate_llama_tensors(file));
  LlamaModel m(std::move(file));
  const ModelFile& f = m.file_;
  for (std::int64_t l = 0; l < f.config.n_layers; ++l) {
    m.layers_.push_back(Layer{to_f32(get(f, l, "attn_norm")), to_f32(get(f, l, "ffn_norm")),
                              &get(f, l, "attn_q"), &get(f, l, "attn_k"), &get(f, l, "attn_v"),
                              &get(f, l, "attn_output"), &get(f, l, "ffn_gate"),
                              &get(f, l, "ffn_up"), &get(f, l, "ffn_down")});
  }
  m.output_norm_ = to_f32(*f.find("output_norm.weight"));
  m.token_embd_ = f.find("token_embd.weight");
  m.output_ = f.config.tied_embeddings ? m.token_embd_ : f.find("output.weight");
  return m;
}

Status LlamaModel::validate(const Batch& batch, const KvCache& cache) const {
  const std::size_t n = batch.tokens.size();
  if (n == 0) return invalid_argument("forward: empty batch");
  if (batch.positions.size() != n || batch.seq_ids.size() != n || batch.need_logits.size() != n) {
    return invalid_argument("forward: batch arrays have different lengths");
  }
  if (cache.kv_dim() != config().n_kv_heads * config().head_dim) {
    return invalid_argument("forward: the KV cache rows hold " + std::to_string(cache.kv_dim()) +
                            " values, the model's K/V rows " + std::to_string(config().n_kv_heads * config().head_dim));
  }
  std::map<std::int32_t, std::int64_t> next_pos;  // per sequence: expected next position
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t tok = batch.tokens[i], pos = batch.positions[i], seq = batch.seq_ids[i];
    if (tok < 0 || tok >= config().vocab_size) {
      return out_of_range("token id " + std::to_string(tok) + " is outside the vocabulary (size " +
                          std::to_string(config().vocab_size) + ")");
    }
    if (pos < 0 || pos >= config().max_seq_len) {
      return out_of_range("position " + std::to_string(pos) + " is outside the model's context (" +
                          std::to_string(config().max_seq_len) + " tokens)");
    }
    auto [it, first] = next_pos.emplace(seq, pos);
    if ((first && pos > cache.length(seq)) || (!first && pos != it->second)) {
      return invalid_argument("forward: positions of sequence " + std::to_string(seq) + " are not consecutive");
    }
    it->second = pos + 1;
  }
  return Status::ok();
}

// Blocks for every sequence's rows, all or nothing: the free-block check counts, for a
// sequence rewriting its tail, every block its rows touch (an upper bound of what truncate +
// reserve take), so no reserve below can fail half way.
Status LlamaModel::reserve(const Batch& batch, KvCache& cache) {
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> span;  // seq → [first, last + 1)
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    auto [it, first] = span.emplace(batch.seq_ids[i], std::pair<std::int64_t, std::int64_t>{batch.positions[i], 0});
    it->second.second = batch.positions[i] + 1;
  }
  std::int64_t needed = 0;
  const std::int32_t bs = cache.block_size();
  for (const auto& [seq, range] : span) {
    needed += range.first < cache.length(seq) ? blocks_for_tokens(range.second, bs) - range.first / bs
                                              : cache.blocks_needed(seq, range.second);
  }
  if (needed > cache.pool().n_free()) {
    return resource_exhausted("forward: the batch needs " + std::to_string(needed) + " KV blocks, " +
                              std::to_string(cache.pool().n_free()) + " are free");
  }
  for (const auto& [seq, range] : span) {
    if (range.first < cache.length(seq)) cache.truncate(seq, range.first);
    PEREGRINE_RETURN_IF_ERROR(cache.reserve(seq, range.second));
  }
  return Status::ok();
}

void LlamaModel::embed(const Batch& batch, std::span<float> x) const {
  const std::int64_t dim = config().dim;
  const std::size_t row_bytes = token_embd_->nbytes / static_cast<std::size_t>(config().vocab_size);
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    const auto* row = static_cast<const std::uint8_t*>(token_embd_->data) + batch.tokens[i] * row_bytes;
    dequantize(token_embd_->dtype, row, x.subspan(static_cast<std::size_t>(i * dim), static_cast<std::size_t>(dim)));
  }
}

void LlamaModel::attention_block(const Layer& layer, std::int64_t l, const Batch& batch,
                                 KvCache& cache, Scratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config();
  const std::int64_t n = s.n, dim = c.dim, hd = c.head_dim;
  const std::int64_t q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd;
  for (std::int64_t i = 0; i < n; ++i) {
    rmsnorm(&s.x[i * dim], layer.attn_norm.data(), &s.xb[i * dim], dim, c.rms_eps);
  }
  matmul(*layer.wq, s.xb, n, s.q, pool);
  matmul(*layer.wk, s.xb, n, s.k, pool);
  matmul(*layer.wv, s.xb, n, s.v, pool);
  std::vector<float> rope_cos(static_cast<std::size_t>(hd)), rope_sin(rope_cos.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t pos = batch.positions[i], seq = batch.seq_ids[i];
    rope_table(pos, hd, c.rope_theta, c.rope_style, rope_cos.data(), rope_sin.data());
    rope_rotate(&s.q[i * q_dim], c.n_heads, hd, rope_cos.data(), rope_sin.data(), c.rope_style);
    rope_rotate(&s.k[i * kv_dim], c.n_kv_heads, hd, rope_cos.data(), rope_sin.data(), c.rope_style);
    cache.write(seq, l, pos, &s.k[i * kv_dim], &s.v[i * kv_dim]);
  }
  // Runs of rows of one sequence at consecutive positions: a prompt chunk takes the tiled
  // prefill kernel, a lone row (decode) the split-K one.
  const AttentionShape shape{c.n_heads, c.n_kv_heads, hd};
  for (std::int64_t i = 0, end; i < n; i = end) {
    const std::int32_t seq = batch.seq_ids[i], p0 = batch.positions[i];
    for (end = i + 1; end < n && batch.seq_ids[end] == seq && batch.positions[end] == p0 + (end - i); ++end) {}
    const KvLayerView k = cache.k_view(seq, l), v = cache.v_view(seq, l);
    if (end - i > 1) {
      attention_prefill(&s.q[i * q_dim], k, v, p0, end - i, shape, &s.attn[i * q_dim], pool);
    } else {
      attention_decode(&s.q[i * q_dim], k, v, p0 + 1, shape, &s.attn[i * q_dim], pool);
    }
  }
  matmul(*layer.wo, s.attn, n, s.xb, pool);
  for (std::size_t j = 0; j < s.x.size(); ++j) s.x[j] += s.xb[j];
}

void LlamaModel::ffn_block(const Layer& layer, Scratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config();
  const std::int64_t dim = c.dim;
  for (std::int64_t i = 0; i < s.n; ++i) {
    rmsnorm(&s.x[i * dim], layer.ffn_norm.data(), &s.xb[i * dim], dim, c.rms_eps);
  }
  matmul(*layer.w_gate, s.xb, s.n, s.gate, pool);
  matmul(*layer.w_up, s.xb, s.n, s.up, pool);
  swiglu(s.gate.data(), s.up.data(), static_cast<std::int64_t>(s.gate.size()));
  matmul(*layer.w_down, s.gate, s.n, s.xb, pool);
  for (std::size_t j = 0; j < s.x.size(); ++j) s.x[j] += s.xb[j];
}

void LlamaModel::lm_head(const Batch& batch, Scratch& s, std::vector<float>& logits,
                         ThreadPool& pool) const {
  const std::int64_t dim = config().dim, n_out = batch.n_logits();
  std::vector<float> normed(static_cast<std::size_t>(n_out * dim));
  std::int64_t r = 0;
  for (std::int64_t i = 0; i < s.n; ++i) {
    if (!batch.need_logits[i]) continue;
    rmsnorm(&s.x[i * dim], output_norm_.data(), &normed[r++ * dim], dim, config().rms_eps);
  }
  logits.resize(static_cast<std::size_t>(n_out * config().vocab_size));
  matmul(*output_, normed, n_out, logits, pool);
}

Status LlamaModel::forward(const Batch& batch, KvCache& cache, std::vector<float>& logits,
                           ThreadPool& pool, std::int64_t n_layers) const {
  const auto n_total = static_cast<std::int64_t>(layers_.size());
  if (n_layers < 0 || n_layers > n_total) {
    return invalid_argument("forward: n_layers " + std::to_string(n_layers) + " is outside [0, " + std::to_string(n_total) + "]");
  }
  if (n_layers == 0) n_layers = n_total;
  if (cache.n_layers() < n_layers) {
    return invalid_argument("forward: the KV cache has " + std::to_string(cache.n_layers()) + " layers, the forward runs " +
                            std::to_string(n_layers));
  }
  PEREGRINE_RETURN_IF_ERROR(validate(batch, cache));
  PEREGRINE_RETURN_IF_ERROR(reserve(batch, cache));
  Scratch s(config(), batch.size());
  embed(batch, s.x);
  for (std::int64_t l = 0; l < n_layers; ++l) {
    const Layer& layer = layers_[static_cast<std::size_t>(l)];
    attention_block(layer, l, batch, cache, s, pool);
    ffn_block(layer, s, pool);
  }
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    const std::int32_t seq = batch.seq_ids[i];
    cache.set_length(seq, batch.positions[i] + 1);  // rows of a sequence are in position order
  }
  lm_head(batch, s, logits, pool);
  return Status::ok();
}

}  // namespace peregrine

#include "model_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "peregrine/model/llama_model.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/float_model.h"
#include "test_models.h"

namespace peregrine::test {

void expect_same_config(const ModelConfig& want, const ModelConfig& got) {
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.dim, want.dim);
  EXPECT_EQ(got.n_layers, want.n_layers);
  EXPECT_EQ(got.n_heads, want.n_heads);
  EXPECT_EQ(got.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.ffn_dim, want.ffn_dim);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.max_seq_len, want.max_seq_len);
  EXPECT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.rms_eps, want.rms_eps);
  EXPECT_EQ(got.tied_embeddings, want.tied_embeddings);
  EXPECT_EQ(got.ffn_down_hadamard, want.ffn_down_hadamard);
  EXPECT_EQ(got.rope_scaling, want.rope_scaling);
  EXPECT_EQ(got.n_experts, want.n_experts);
  EXPECT_EQ(got.n_experts_used, want.n_experts_used);
  EXPECT_EQ(got.expert_ffn_dim, want.expert_ffn_dim);
  EXPECT_EQ(got.shared_expert_ffn_dim, want.shared_expert_ffn_dim);
  EXPECT_EQ(got.expert_weights_norm, want.expert_weights_norm);
  EXPECT_EQ(got.sliding_window, want.sliding_window);
  EXPECT_EQ(got.sliding_window_period, want.sliding_window_period);
  EXPECT_EQ(got.attn_scale, want.attn_scale);
  EXPECT_EQ(got.attn_softcap, want.attn_softcap);
  EXPECT_EQ(got.final_softcap, want.final_softcap);
  EXPECT_EQ(got.embed_scale, want.embed_scale);
  EXPECT_EQ(got.activation, want.activation);
}

std::int64_t interleaved_row_of_neox_row(std::int64_t j, std::int64_t head_dim) {
  const std::int64_t head = j / head_dim, dim = j % head_dim, half = head_dim / 2;
  const std::int64_t i = dim % half, second = dim / half;
  return head * head_dim + 2 * i + second;
}

namespace {

bool is_rope_tensor(const std::string& name) {
  return name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight");
}

/// Row r of `got` against its source row of `want`: bytes and decoded values.
void expect_same_row(const TensorView& want, std::int64_t want_row, const TensorView& got, std::int64_t r) {
  const std::size_t rb = *want.row_bytes();
  const auto* a = static_cast<const std::uint8_t*>(want.data) + static_cast<std::size_t>(want_row) * rb;
  const auto* b = static_cast<const std::uint8_t*>(got.data) + static_cast<std::size_t>(r) * rb;
  ASSERT_EQ(std::memcmp(a, b, rb), 0) << want.name << " row " << r;
  std::vector<float> x(static_cast<std::size_t>(want.row_length())), y(x.size());
  dequantize_row(want, want_row, x);
  dequantize_row(got, r, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::memcmp(&x[i], &y[i], sizeof(float)), 0) << want.name << " row " << r << " value " << i;
  }
}

}  // namespace

void expect_same_tensors(const ModelFile& want, const ModelFile& got) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  const bool reordered = want.config.rope_style != got.config.rope_style;
  for (const auto& [name, w] : want.tensors) {
    const TensorView* g = got.find(name);
    ASSERT_NE(g, nullptr) << name;
    ASSERT_EQ(g->dtype, w.dtype) << name;
    ASSERT_EQ(g->shape, w.shape) << name;
    ASSERT_EQ(g->quant, w.quant) << name;
    ASSERT_EQ(g->nbytes, w.nbytes) << name;
    const bool map_rows = reordered && is_rope_tensor(name);
    const std::int64_t hd = want.config.head_dim;
    const bool neox_got = got.config.rope_style == RopeStyle::kNeox;
    for (std::int64_t r = 0; r < w.n_rows(); ++r) {
      // got row r holds want row: NeoX row r ← interleaved row; interleaved row r ← its NeoX row.
      std::int64_t src = r;
      if (map_rows && neox_got) src = interleaved_row_of_neox_row(r, hd);
      if (map_rows && !neox_got) {
        for (std::int64_t j = r - r % hd; j < r - r % hd + hd; ++j) {
          if (interleaved_row_of_neox_row(j, hd) == r) src = j;
        }
      }
      expect_same_row(w, src, *g, r);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

std::vector<float> prefill_logits(const ModelFile& m, bool decode_to_f32, std::int32_t n_tokens, WeightPlacement placement) {
  ModelFile file = m;
  if (decode_to_f32) {
    auto f = FloatModel::from(m);
    EXPECT_TRUE(f) << f.status().message();
    if (!f) return {};
    file = f->view();
  }
  auto model = LlamaModel::create(std::move(file), placement);
  EXPECT_TRUE(model) << model.status().message();
  if (!model) return {};
  ThreadPool pool(2);
  KvCache cache = make_kv_cache(model->config(), std::max(16, n_tokens));
  Batch batch;
  const std::int32_t tokens[] = {1, 403, 407, 261, 500, 12, 99, 311, 275, 430, 68, 2};
  for (std::int32_t i = 0; i < n_tokens; ++i) batch.add(i < 12 ? tokens[i] : (37 * i + 5) % 512, i, 0, true);
  std::vector<float> logits;
  const Status st = model->forward(batch, cache, logits, pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<float>::infinity();
  float d = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace peregrine::test

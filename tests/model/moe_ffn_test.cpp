// The Mixture-of-Experts FFN: top-k routing as the Hugging Face MoE blocks compute it, the
// grouped (one matmul per expert) path against its per-token scalar twin on the test models'
// real expert layouts (F32 and Q8_0, with and without a shared expert), and the forward's
// counters: each chosen expert's weights read once per forward, tokens per expert summing to
// top-k per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "peregrine/core/prng.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/model/moe_ffn.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

TEST(RouteTopK, SoftmaxOverAllOrOverTheSelectedLogits) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};  // a tie: the lower index first
  std::vector<std::int32_t> expert(2);
  std::vector<float> weight(2);
  route_top_k(logits, 1, 5, 2, false, expert, weight);
  EXPECT_EQ(expert, (std::vector<std::int32_t>{1, 3}));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  EXPECT_NEAR(weight[0], std::exp(2.0) / sum, 1e-7);  // Qwen2-MoE / OLMoE: of all experts
  EXPECT_NEAR(weight[1], std::exp(2.0) / sum, 1e-7);
  route_top_k(logits, 1, 5, 2, true, expert, weight);  // Mixtral: softmax of the two selected
  EXPECT_FLOAT_EQ(weight[0], 0.5f);
  EXPECT_FLOAT_EQ(weight[1], 0.5f);
  std::vector<std::int32_t> all(5);
  std::vector<float> all_weight(5);
  route_top_k(logits, 1, 5, 5, false, all, all_weight);  // k = n_experts: every expert, by logit
  EXPECT_EQ(all, (std::vector<std::int32_t>{1, 3, 4, 0, 2}));
  EXPECT_NEAR(std::accumulate(all_weight.begin(), all_weight.end(), 0.0), 1.0, 1e-6);
}

ModelFile load(const std::string& name) {
  auto f = load_model_file(test::testdata_dir() + "/" + name);
  EXPECT_TRUE(f) << f.status().message();
  return std::move(*f);
}

std::vector<float> random_rows(std::int64_t n, std::int64_t dim, std::uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  Xoshiro256Plus(seed).fill_uniform(x, 1.0f);
  return x;
}

TEST(MoeFfn, GroupedMatchesPerTokenReferenceOnEveryFamilyLayout) {
  ThreadPool pool(2);
  for (const char* name : {"gguf-f32-mixtral.gguf", "gguf-q8_0-mixtral.gguf", "gguf-f32-qwen2moe.gguf",
                           "gguf-q8_0-qwen2moe.gguf", "gguf-f32-olmoe.gguf"}) {
    SCOPED_TRACE(name);
    const ModelFile f = load(name);
    const MoeWeights w = moe_layer_weights(f, 1);
    ASSERT_NE(w.router, nullptr);
    EXPECT_EQ(w.shared_gate != nullptr, f.config.shared_expert_ffn_dim > 0);
    const std::int64_t dim = f.config.dim;
    for (std::int64_t n : {1, 3, 17}) {
      const std::vector<float> x = random_rows(n, dim, 7 + n);
      std::vector<float> got(x.size(), NAN), want(x.size(), NAN);
      moe_ffn(w, x, n, got, pool, nullptr, 0);
      moe_ffn_reference(w, x, n, want);
      float max_diff = 0.0f, max_abs = 0.0f;
      for (std::size_t i = 0; i < got.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
        max_abs = std::max(max_abs, std::fabs(want[i]));
      }
      // Q8_0: the grouped path multiplies 8-bit activation blocks, the reference the f32 rows.
      const float tol = f.find("blk.1.ffn_up.0.weight")->dtype == DType::kF32 ? 1e-5f : 2e-2f * max_abs;
      EXPECT_LE(max_diff, tol) << "n " << n;
      EXPECT_GT(max_abs, 0.0f);
    }
  }
}

TEST(MoeFfn, ForwardCountsEachChosenExpertOnceAndTopKTokensPerToken) {
  const auto model = test::load_test_model("gguf-f32-olmoe.gguf");
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  KvCache cache = test::make_kv_cache(c, 32);
  Batch batch;
  const std::int64_t n = 20;
  for (std::int32_t i = 0; i < n; ++i) batch.add(static_cast<std::int32_t>((i * 37 + 5) % c.vocab_size), i, 0, i == n - 1);
  std::vector<float> logits;
  ASSERT_TRUE(model->forward(batch, cache, logits, pool).is_ok());
  const std::vector<std::uint64_t> tokens = model->counters().expert_tokens();
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(c.n_layers * c.n_experts));
  std::uint64_t expected_bytes = model->file().find("output.weight")->nbytes;
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    std::uint64_t routed = 0;
    for (std::int64_t e = 0; e < c.n_experts; ++e) {
      const std::uint64_t t = tokens[static_cast<std::size_t>(l * c.n_experts + e)];
      routed += t;
      if (t > 0) {  // read once, whatever its token count
        for (const char* proj : {"ffn_gate", "ffn_up", "ffn_down"}) expected_bytes += model->file().find(expert_tensor_name(l, proj, e))->nbytes;
      }
    }
    EXPECT_EQ(routed, static_cast<std::uint64_t>(n * c.n_experts_used)) << "layer " << l;
    for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_inp"}) {
      expected_bytes += model->file().find(layer_tensor_name(l, name))->nbytes;
    }
  }
  EXPECT_EQ(model->counters().weight_bytes(), expected_bytes);
}

}  // namespace
}  // namespace peregrine

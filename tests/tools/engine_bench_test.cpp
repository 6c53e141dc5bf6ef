// run_bench() and model_cost() on the real stories260K model.
#include "peregrine/tools/engine_bench.h"

#include <gtest/gtest.h>

#include "peregrine/formats/model_file.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_stories260k();
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<LlamaModel> model_;
  ThreadPool pool_{2};
};

TEST_F(BenchTest, MeasuresEveryRepetitionOfBothTests) {
  BenchParams p;
  p.n_prompt = 16;
  p.n_gen = 8;
  p.reps = 3;
  auto r = run_bench(*model_, p, pool_);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->pp_tps.size(), 3u);
  ASSERT_EQ(r->tg_tps.size(), 3u);
  for (double t : r->pp_tps) EXPECT_GT(t, 0.0);
  for (double t : r->tg_tps) EXPECT_GT(t, 0.0);
  EXPECT_GT(r->pp_flops, 0.0);
  EXPECT_GT(r->tg_flops, 0.0);
}

TEST_F(BenchTest, SkipsATestOfZeroTokens) {
  BenchParams p;
  p.n_prompt = 0;
  p.n_gen = 4;
  p.reps = 1;
  auto r = run_bench(*model_, p, pool_);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->pp_tps.empty());
  EXPECT_EQ(r->tg_tps.size(), 1u);
}

TEST_F(BenchTest, RejectsBadParameters) {
  BenchParams p;
  p.reps = 0;
  EXPECT_EQ(run_bench(*model_, p, pool_).status().code(), ErrorCode::kInvalidArgument);
  p = BenchParams{};
  p.n_prompt = p.n_gen = 0;
  EXPECT_EQ(run_bench(*model_, p, pool_).status().code(), ErrorCode::kInvalidArgument);
  p = BenchParams{};
  p.n_prompt = model_->config().max_seq_len + 1;  // stories260K: 512
  EXPECT_EQ(run_bench(*model_, p, pool_).status().code(), ErrorCode::kInvalidArgument);
  p = BenchParams{};
  p.n_gen = -1;
  EXPECT_EQ(run_bench(*model_, p, pool_).status().code(), ErrorCode::kInvalidArgument);
}

// stories260K: dim 64, 5 layers, 8 heads / 4 KV heads (head_dim 8), ffn 172, vocab 512, tied.
TEST_F(BenchTest, ModelCostCountsEveryMatrixOnce) {
  const ModelConfig& c = model_->config();
  const double per_layer_macs = static_cast<double>(c.dim) * (2 * c.n_heads * c.head_dim + 2 * c.n_kv_heads * c.head_dim) +
                                3.0 * static_cast<double>(c.dim) * static_cast<double>(c.ffn_dim);
  const double head_macs = static_cast<double>(c.vocab_size) * static_cast<double>(c.dim);
  const ModelCost cost = model_cost(*model_);
  EXPECT_DOUBLE_EQ(cost.matmul_flops_per_token, 2.0 * (c.n_layers * per_layer_macs + head_macs));
  // f32 weights, tied head: every tensor is read once per decode step, the embedding as the head.
  EXPECT_DOUBLE_EQ(cost.decode_weight_bytes, static_cast<double>(model_->file().weight_bytes()));
  EXPECT_DOUBLE_EQ(cost.attention_flops_per_pair, 4.0 * c.n_heads * c.head_dim * c.n_layers);
  // One token at position 0: the matmuls plus one (query, key) pair per layer.
  EXPECT_DOUBLE_EQ(cost.prefill_flops(0, 1, c.vocab_size, c.dim),
                   cost.matmul_flops_per_token + cost.attention_flops_per_pair);
}

// Measured bytes: a dense decode step reads every matrix once (norms are not matrix reads).
TEST_F(BenchTest, MeasuredWeightBytesOfADenseModelAreItsMatrices) {
  BenchParams p;
  p.n_prompt = 16;
  p.n_gen = 4;
  p.reps = 2;
  auto r = run_bench(*model_, p, pool_);
  ASSERT_TRUE(r) << r.status().message();
  double matrices = 0.0;
  for (const auto& [name, t] : model_->file().tensors) {
    if (t.shape.size() == 2) matrices += static_cast<double>(t.nbytes);
  }
  EXPECT_DOUBLE_EQ(r->tg_weight_bytes, matrices);
  EXPECT_DOUBLE_EQ(r->pp_weight_bytes, matrices);
  EXPECT_TRUE(r->expert_tokens.empty());
}

// --profile: every timed forward is counted, the op kinds nest inside the forward's time, and
// each matmul's bytes land on its op kind (Q/K/V on "qkv projection", the tied head on "lm head").
TEST_F(BenchTest, ProfileAttributesTimeAndBytesToOpKinds) {
  BenchParams p;
  p.n_prompt = 16;
  p.n_gen = 4;
  p.reps = 2;
  p.profile = true;
  auto r = run_bench(*model_, p, pool_);
  ASSERT_TRUE(r) << r.status().message();
  const auto at = [](const ForwardProfileTotals& t, ForwardOp op) { return t[static_cast<std::size_t>(op)]; };
  const ModelConfig& c = model_->config();
  double qkv = 0.0;
  for (const auto& [name, t] : model_->file().tensors) {
    if (name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight") || name.ends_with("attn_v.weight")) {
      qkv += static_cast<double>(t.nbytes);
    }
  }
  for (const auto* t : {&r->pp_profile, &r->tg_profile}) {
    const bool decode = t == &r->tg_profile;
    const std::uint64_t forwards = decode ? p.reps * p.n_gen : p.reps;
    const ForwardOpTotals whole = at(*t, ForwardOp::kForward);
    EXPECT_EQ(whole.calls, forwards);
    EXPECT_EQ(at(*t, ForwardOp::kAttention).calls, forwards * c.n_layers);
    EXPECT_EQ(at(*t, ForwardOp::kNorm).calls, 4 * forwards * c.n_layers);  // two norms, two residual adds
    EXPECT_EQ(at(*t, ForwardOp::kMoeFfn).calls, 0u);
    double seconds = 0.0, bytes = 0.0;
    for (std::size_t i = 0; i + 1 < kForwardOpCount; ++i) {
      seconds += (*t)[i].seconds;
      bytes += (*t)[i].weight_bytes;
    }
    EXPECT_LE(seconds, whole.seconds);
    EXPECT_GT(seconds, 0.0);
    EXPECT_DOUBLE_EQ(bytes, whole.weight_bytes);
    EXPECT_DOUBLE_EQ(whole.weight_bytes, static_cast<double>(forwards) * (decode ? r->tg_weight_bytes : r->pp_weight_bytes));
    EXPECT_DOUBLE_EQ(at(*t, ForwardOp::kQkvProjection).weight_bytes, static_cast<double>(forwards) * qkv);
    EXPECT_DOUBLE_EQ(at(*t, ForwardOp::kLmHead).weight_bytes,
                     static_cast<double>(forwards) * static_cast<double>(model_->file().find("token_embd.weight")->nbytes));
  }
  // Without --profile nothing is timed.
  p.profile = false;
  auto plain = run_bench(*model_, p, pool_);
  ASSERT_TRUE(plain) << plain.status().message();
  EXPECT_EQ(plain->tg_profile[static_cast<std::size_t>(ForwardOp::kForward)].calls, 0u);
}

// A Mixture-of-Experts model (the OLMoE test model: 8 experts, top-2): a decode step reads the
// router and 2 experts per layer, a prefill each chosen expert once per layer (not once per
// token), and the routing statistics add up to top-k per token per layer.
TEST(BenchMoe, ReadsEachChosenExpertOncePerForwardAndCountsTheRouting) {
  const auto model = test::load_test_model("gguf-f32-olmoe.gguf");
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  BenchParams p;
  p.n_prompt = 32;
  p.n_gen = 4;
  p.reps = 1;
  auto r = run_bench(*model, p, pool);
  ASSERT_TRUE(r) << r.status().message();
  double experts = 0.0, others = 0.0;
  for (const auto& [name, t] : model->file().tensors) {
    if (t.shape.size() != 2 || name == "token_embd.weight") continue;  // untied: rows looked up, not multiplied
    (name.find("ffn_") != std::string::npos && name.find("ffn_gate_inp") == std::string::npos ? experts : others) +=
        static_cast<double>(t.nbytes);
  }
  const double one_expert = experts / static_cast<double>(c.n_experts * c.n_layers);
  EXPECT_DOUBLE_EQ(r->tg_weight_bytes, others + static_cast<double>(c.n_experts_used * c.n_layers) * one_expert);
  EXPECT_LE(r->pp_weight_bytes, others + experts);  // 32 tokens x top-2 of 8: every expert, once
  EXPECT_GT(r->pp_weight_bytes, others);
  ASSERT_EQ(r->expert_tokens.size(), static_cast<std::size_t>(c.n_layers * c.n_experts));
  std::uint64_t routed = 0;
  for (std::uint64_t t : r->expert_tokens) routed += t;
  EXPECT_EQ(routed, static_cast<std::uint64_t>((p.reps + 1) * (p.n_prompt + p.n_gen) * c.n_experts_used * c.n_layers));
}

TEST(MeanSd, SampleStandardDeviation) {
  const MeanSd m = mean_sd({2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0});
  EXPECT_DOUBLE_EQ(m.mean, 5.0);
  EXPECT_NEAR(m.sd, 2.138089935, 1e-9);
  EXPECT_EQ(mean_sd({3.0}).sd, 0.0);
  EXPECT_EQ(mean_sd({}).mean, 0.0);
}

}  // namespace
}  // namespace peregrine

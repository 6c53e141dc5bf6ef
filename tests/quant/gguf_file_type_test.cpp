// gguf_tensor_dtype: llama-quantize's per-tensor choices (llama-quant.cpp llama_tensor_get_type)
// on model shapes beyond the 2-layer test files: the use_more_bits layers of a 32-layer model, GQA
// bumps, tied embeddings, and the fallbacks for rows that are not whole blocks.
#include "peregrine/quant/gguf_file_type.h"

#include <gtest/gtest.h>

#include <vector>

namespace peregrine {
namespace {

ModelConfig config(std::int64_t n_layers, std::int64_t n_heads, std::int64_t n_kv_heads, bool tied = false) {
  ModelConfig c;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.tied_embeddings = tied;
  return c;
}

DType type_of(GgufFileType t, const ModelConfig& c, const std::string& name, std::int64_t in = 4096) {
  const std::vector<std::int64_t> shape{4096, in};
  auto d = gguf_tensor_dtype(t, c, name, shape);
  EXPECT_TRUE(d.has_value()) << d.status().message();
  return d.has_value() ? *d : DType::kF32;
}

TEST(GgufFileType, NamesAndLlamaFtypeIds) {
  EXPECT_EQ(gguf_file_type_from_name("q4_k_m"), GgufFileType::kQ4_K_M);
  EXPECT_EQ(gguf_file_type_from_name("IQ4_XS"), GgufFileType::kIQ4_XS);
  EXPECT_FALSE(gguf_file_type_from_name("Q4_K").has_value());
  EXPECT_FALSE(gguf_file_type_from_name("Q4_K_X").has_value());
  const std::pair<GgufFileType, std::uint32_t> ids[] = {
      {GgufFileType::kF32, 0},     {GgufFileType::kF16, 1},     {GgufFileType::kQ4_0, 2},    {GgufFileType::kQ4_1, 3},
      {GgufFileType::kQ8_0, 7},    {GgufFileType::kQ5_0, 8},    {GgufFileType::kQ5_1, 9},    {GgufFileType::kQ2_K, 10},
      {GgufFileType::kQ3_K_S, 11}, {GgufFileType::kQ3_K_M, 12}, {GgufFileType::kQ3_K_L, 13}, {GgufFileType::kQ4_K_S, 14},
      {GgufFileType::kQ4_K_M, 15}, {GgufFileType::kQ5_K_S, 16}, {GgufFileType::kQ5_K_M, 17}, {GgufFileType::kQ6_K, 18},
      {GgufFileType::kIQ4_NL, 25}, {GgufFileType::kIQ4_XS, 30}, {GgufFileType::kBF16, 32}};
  for (const auto& [t, id] : ids) {
    EXPECT_EQ(llama_ftype_id(t), id) << gguf_file_type_name(t);
    EXPECT_EQ(gguf_file_type_from_name(gguf_file_type_name(t)), t);
  }
}

TEST(GgufFileType, Q4_K_MGivesSixBitsToTheUseMoreBitsLayers) {
  const ModelConfig c = config(32, 32, 8);
  // First and last eighth (0-3, 28-31) and every third layer between (6, 9, ..., 27).
  for (std::int64_t l = 0; l < 32; ++l) {
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    const DType want = more ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, layer_tensor_name(l, "attn_v")), want) << l;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, layer_tensor_name(l, "ffn_down")), want) << l;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, layer_tensor_name(l, "attn_q")), DType::kQ4_K) << l;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_S, c, layer_tensor_name(l, "ffn_down")), l < 4 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(type_of(GgufFileType::kQ3_K_M, c, layer_tensor_name(l, "ffn_down")), l < 2 ? DType::kQ5_K : DType::kQ4_K);
    EXPECT_EQ(type_of(GgufFileType::kIQ4_XS, c, layer_tensor_name(l, "ffn_down")), l < 4 ? DType::kQ5_K : DType::kIQ4_XS);
  }
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "output.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "token_embd.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(GgufFileType::kQ8_0, c, "output.weight"), DType::kQ8_0);
  EXPECT_EQ(type_of(GgufFileType::kF16, c, "output.weight"), DType::kF16);
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "output_norm.weight"), DType::kF32);  // norms never
}

// Mixture-of-Experts: every expert's ffn_down follows the ffn_down rule of its layer, the
// router stays F32 (llama-quantize does not quantize ffn_gate_inp).
TEST(GgufFileType, ExpertsTakeTheirDenseRuleAndRoutersStayF32) {
  ModelConfig c = config(32, 32, 8);
  c.n_experts = 8;
  c.n_experts_used = 2;
  for (std::int64_t l : {0, 6, 10}) {
    const DType want = l == 10 ? DType::kQ4_K : DType::kQ6_K;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, expert_tensor_name(l, "ffn_down", 5)), want) << l;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, expert_tensor_name(l, "ffn_up", 5)), DType::kQ4_K) << l;
    EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, layer_tensor_name(l, "ffn_gate_inp")), DType::kF32) << l;
  }
}

TEST(GgufFileType, GqaOfFourOrMoreBumpsAttnV) {
  const ModelConfig gqa4 = config(32, 32, 8), gqa2 = config(32, 32, 16);
  EXPECT_EQ(type_of(GgufFileType::kQ2_K, gqa4, "blk.5.attn_v.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(GgufFileType::kQ2_K, gqa2, "blk.5.attn_v.weight"), DType::kQ3_K);
  EXPECT_EQ(type_of(GgufFileType::kIQ4_NL, gqa4, "blk.5.attn_v.weight"), DType::kQ5_K);
  EXPECT_EQ(type_of(GgufFileType::kIQ4_NL, gqa2, "blk.5.attn_v.weight"), DType::kIQ4_NL);
  // A 70B shape (80 layers, GQA): Q3_K / Q4_K attn_v become Q5_K.
  EXPECT_EQ(type_of(GgufFileType::kQ3_K_M, config(80, 64, 8), "blk.40.attn_v.weight"), DType::kQ5_K);
}

TEST(GgufFileType, TiedEmbeddingsTakeTheOutputRule) {
  EXPECT_EQ(type_of(GgufFileType::kQ4_0, config(2, 4, 4, true), "token_embd.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of(GgufFileType::kQ4_0, config(2, 4, 4, false), "token_embd.weight"), DType::kQ4_0);
}

TEST(GgufFileType, RowsThatAreNotWholeBlocksFallBack) {
  const ModelConfig c = config(2, 4, 2);
  // 288 = 9 blocks of 32, not whole 256-value super-blocks.
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "blk.0.attn_q.weight", 288), DType::kQ5_0);
  EXPECT_EQ(type_of(GgufFileType::kQ5_K_S, c, "blk.0.attn_q.weight", 288), DType::kQ5_1);
  EXPECT_EQ(type_of(GgufFileType::kQ2_K, c, "blk.0.attn_q.weight", 288), DType::kIQ4_NL);
  EXPECT_EQ(type_of(GgufFileType::kIQ4_XS, c, "blk.0.attn_q.weight", 288), DType::kIQ4_NL);
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "output.weight", 288), DType::kQ8_0);
  EXPECT_EQ(type_of(GgufFileType::kQ4_0, c, "output.weight", 288), DType::kQ8_0);  // Q6_K's fallback
  // 300: not even whole 32-value blocks.
  EXPECT_EQ(type_of(GgufFileType::kQ4_K_M, c, "blk.0.attn_q.weight", 300), DType::kF16);
  const std::vector<std::int64_t> shape{64, 300};
  auto q4_0 = gguf_tensor_dtype(GgufFileType::kQ4_0, c, "blk.0.attn_q.weight", shape);
  ASSERT_FALSE(q4_0.has_value());
  EXPECT_EQ(q4_0.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(q4_0.status().message().find("not whole q4_0 blocks"), std::string::npos) << q4_0.status().message();
  EXPECT_EQ(*gguf_tensor_dtype(GgufFileType::kQ4_0, c, "blk.0.attn_norm.weight", std::vector<std::int64_t>{300}), DType::kF32);
}

}  // namespace
}  // namespace peregrine

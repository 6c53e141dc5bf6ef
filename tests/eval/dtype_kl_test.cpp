// Quality of each weight dtype against F32 on real text: stories260K with its weights converted
// on load (--dtype) vs the original F32, teacher-forced on a real TinyStories story.
//
// The bounds are regression guards set about 5-10x above the figures this test prints (measured
// 2026-11 with 8-bit activation blocks in the Q8_0/Q4_0 matmuls: mean KL f16 9.1e-7, bf16 7.3e-5,
// q8_0 9.9e-4, q4_0 0.129; top-1 1.000, 0.994, 0.990, 0.796), plus the ordering the formats' precision implies: F16 (11-bit mantissa) < BF16 (8-bit)
// and Q8_0 (8-bit blocks) < Q4_0 (4-bit blocks). stories260K is tiny (dim 64), so 4-bit RTN
// costs it far more than it costs billion-parameter models.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "peregrine/eval/logit_comparison.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::string model_path() { return test::shared_dir() + "/models/stories260K/stories260K.bin"; }

std::unique_ptr<LlamaModel> load(DType dtype, ThreadPool& pool) {
  auto file = load_model_file(model_path());
  EXPECT_TRUE(file) << file.status().message();
  if (dtype != DType::kF32) {
    EXPECT_TRUE(convert_model_weights(*file, dtype, &pool));
  }
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  return std::make_unique<LlamaModel>(std::move(*m));
}

std::vector<std::int32_t> story_tokens() {
  auto file = load_model_file(model_path());
  EXPECT_TRUE(file);
  auto tok = load_tokenizer(*file, "");
  EXPECT_TRUE(tok);
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt");
  auto ids = (*tok)->encode(text, true);
  ids.resize(std::min<std::size_t>(ids.size(), 500));  // within the 512-token context
  return ids;
}

TEST(DtypeKl, EachFormatStaysCloseToF32InOrderOfPrecision) {
  ThreadPool pool(2);
  const auto tokens = story_tokens();
  ASSERT_GT(tokens.size(), 300u);
  const auto f32 = load(DType::kF32, pool);
  // Upper bounds on the mean KL (nats) and lower bounds on top-1 agreement.
  const std::map<DType, std::pair<double, double>> bounds = {
      {DType::kF16, {1e-5, 0.99}}, {DType::kBF16, {5e-4, 0.97}},
      {DType::kQ8_0, {5e-3, 0.97}}, {DType::kQ4_0, {0.6, 0.7}}};
  std::map<DType, double> kl;
  for (const auto& [dtype, bound] : bounds) {
    const auto m = load(dtype, pool);
    auto c = compare_logits(*f32, *m, tokens, pool);
    ASSERT_TRUE(c) << c.status().message();
    std::printf("[ dtype KL ] %-4s positions %lld  mean KL %.3e  max KL %.3e  top-1 %.4f  ppl %.4f (f32 %.4f)\n",
                std::string(dtype_name(dtype)).c_str(), static_cast<long long>(c->n_positions), c->mean_kl,
                c->max_kl, c->top1_agreement, c->candidate_ppl, c->reference_ppl);
    EXPECT_LT(c->mean_kl, bound.first) << dtype_name(dtype);
    EXPECT_GE(c->top1_agreement, bound.second) << dtype_name(dtype);
    kl[dtype] = c->mean_kl;
  }
  EXPECT_LT(kl[DType::kF16], kl[DType::kBF16]);
  EXPECT_LT(kl[DType::kQ8_0], kl[DType::kQ4_0]);
}

}  // namespace
}  // namespace peregrine

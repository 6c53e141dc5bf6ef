// The ggml block-format kernels on whole models: each of llama.cpp's files in
// ../shared/models/kquant-test run as stored (integer dot products against 8-bit activation
// blocks, gemm_ggml / gemm_quant) against the same file decoded exactly to f32 on load (float
// matmuls), teacher-forced on real text. The two differ only by the activations' 8-bit rounding,
// the error Q8_0 / Q4_0 models have always had here, so every type must stay within a small
// factor of the Q8_0 file's KL (measured 2026-11-24: mean KL 2.2e-4 .. 2.6e-4 for every type, Q8_0 2.3e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "peregrine/eval/logit_comparison.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::string kquant_file(const std::string& type) {
  return test::shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf";
}

std::unique_ptr<LlamaModel> load(const std::string& path, bool decode_to_f32, ThreadPool& pool) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (decode_to_f32) {
    EXPECT_TRUE(convert_model_weights(*file, DType::kF32, &pool));
  }
  auto m = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(m) << m.status().message();
  return std::make_unique<LlamaModel>(std::move(*m));
}

std::vector<std::int32_t> text_tokens(const std::string& path) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file);
  auto tok = load_tokenizer(*file, "");
  EXPECT_TRUE(tok);
  auto ids = (*tok)->encode(test::read_file(test::shared_dir() + "/data/tinystories/tinystories_sample.txt"), true);
  ids.resize(std::min<std::size_t>(ids.size(), 250));  // within the 256-token context
  return ids;
}

TEST(KquantKernelKl, EveryTypeAsStoredStaysAsCloseToItsF32DecodingAsQ8_0) {
  ThreadPool pool(2);
  const auto tokens = text_tokens(kquant_file("Q8_0"));
  ASSERT_GT(tokens.size(), 200u);
  std::map<std::string, double> kl;
  for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
                           "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_XS"}) {
    const auto decoded = load(kquant_file(type), true, pool);
    const auto stored = load(kquant_file(type), false, pool);
    auto c = compare_logits(*decoded, *stored, tokens, pool);
    ASSERT_TRUE(c) << type << ": " << c.status().message();
    std::printf("[ kernel KL ] %-7s mean KL %.3e  max KL %.3e  top-1 %.4f\n", type, c->mean_kl, c->max_kl, c->top1_agreement);
    kl[type] = c->mean_kl;
  }
  for (const auto& [type, v] : kl) {
    EXPECT_GT(v, 0.0) << type;  // the activations are rounded: not the float path
    EXPECT_LT(v, 2.0 * kl["Q8_0"]) << type;  // measured: every type within 1.12x of Q8_0
  }
}

}  // namespace
}  // namespace peregrine

// The ggml block-format kernels on whole models: each of llama.cpp's files in
// ../shared/models/kquant-test run as stored (integer dot products against 8-bit activation
// blocks, gemm_ggml / gemm_quant) against the same file decoded exactly to f32 on load (float
// matmuls), teacher-forced on real text. The two differ only by the activations' 8-bit rounding.
//  - Q8_0, Q4_0 and the legacy formats take activation blocks of 32 (Q8_0), the error Q8_0 / Q4_0
//    models have always had here: every one within a small factor of the Q8_0 file's KL
//    (measured 2026-11-24: mean KL 2.3e-4 .. 2.6e-4, Q8_0 2.3e-4).
//  - The K-quants and IQ4_XS take ggml's Q8_K blocks of 256 (coarser: about twice that KL,
//    measured 4.5e-4 .. 5.2e-4), the price of their integer-scaled decode; that rounding must
//    stay small beside the error the weight format itself makes (the f32 decoding against the
//    F32 source model: 3.2e-3 for Q6_K, the finest of them, up to 0.43 for Q2_K).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
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

// Mean KL between the file of `type` decoded to f32 and run as stored (printed).
double kernel_kl(const std::string& type, const std::vector<std::int32_t>& tokens, ThreadPool& pool) {
  const auto decoded = load(kquant_file(type), true, pool);
  const auto stored = load(kquant_file(type), false, pool);
  auto c = compare_logits(*decoded, *stored, tokens, pool);
  EXPECT_TRUE(c) << type << ": " << c.status().message();
  if (!c) return 0.0;
  std::printf("[ kernel KL ] %-7s mean KL %.3e  max KL %.3e  top-1 %.4f\n", type.c_str(), c->mean_kl, c->max_kl, c->top1_agreement);
  return c->mean_kl;
}

TEST(KquantKernelKl, Q8_0BlockTypesAsStoredStayAsCloseToTheirF32DecodingAsQ8_0) {
  ThreadPool pool(2);
  const auto tokens = text_tokens(kquant_file("Q8_0"));
  ASSERT_GT(tokens.size(), 200u);
  const double q8_0 = kernel_kl("Q8_0", tokens, pool);
  for (const char* type : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"}) {
    const double v = kernel_kl(type, tokens, pool);
    EXPECT_GT(v, 0.0) << type;  // the activations are rounded: not the float path
    EXPECT_LT(v, 2.0 * q8_0) << type;  // measured: every type within 1.12x of Q8_0
  }
}

TEST(KquantKernelKl, Q8_KActivationRoundingIsSmallBesideTheWeightFormatsOwnError) {
  ThreadPool pool(2);
  const auto tokens = text_tokens(kquant_file("Q8_0"));
  ASSERT_GT(tokens.size(), 200u);
  const auto source = load(kquant_file("f32"), false, pool);
  for (const char* type : {"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_XS"}) {
    const double kernel = kernel_kl(type, tokens, pool);
    const auto decoded = load(kquant_file(type), true, pool);
    auto weights = compare_logits(*source, *decoded, tokens, pool);
    ASSERT_TRUE(weights) << type << ": " << weights.status().message();
    std::printf("[ kernel KL ] %-7s weight format's own KL to the F32 source %.3e (kernel / own %.3f)\n", type,
                weights->mean_kl, kernel / weights->mean_kl);
    EXPECT_GT(kernel, 0.0) << type;  // the activations are rounded: not the float path
    EXPECT_LT(kernel, 0.25 * weights->mean_kl) << type;  // measured: at most 0.15 (Q6_K)
  }
}

}  // namespace
}  // namespace peregrine

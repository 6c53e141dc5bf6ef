// Issue #6's acceptance on the real models: each method's mean KL divergence against the F32
// model on held-out TinyStories text (calibration: tinystories_sample.txt; evaluation: all of
// tinystories_valid_excerpt.txt, ~15.5k tokens, in consecutive windows of min(256, context)).
#include "peregrine/quant/quantize_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "real_model_eval.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using test::RealModel;

RealModel load(const std::string& rel) { return test::load_real_model(rel); }

QuantizeOptions method(QuantMethod m, int bits, std::int64_t group, bool asymmetric = false) {
  QuantizeOptions o;
  o.method = m;
  o.bits = bits;
  o.group = group;
  o.asymmetric = asymmetric;
  o.calib_path = test::calibration_text_path();
  return o;
}

// `m` quantized with `o`.
ModelFile quantized(const RealModel& m, const QuantizeOptions& o) {
  ThreadPool pool(2);
  auto q = quantize_model(m.file, m.tok.get(), o, pool);
  EXPECT_TRUE(q.has_value()) << q.status().message();
  return q.has_value() ? std::move(*q) : ModelFile{};
}

double kld_of(const RealModel& m, ModelFile q, std::int64_t max_windows = -1) { return test::mean_kld(m, std::move(q), max_windows); }

double kld(const RealModel& m, const QuantizeOptions& o, std::int64_t max_windows = -1) {
  return kld_of(m, quantized(m, o), max_windows);
}

class QuantizeModelTest : public ::testing::TestWithParam<const char*> {
 protected:
  static std::map<std::string, RealModel>& models() {
    static std::map<std::string, RealModel> m;
    return m;
  }
  const RealModel& model() {
    auto& all = models();
    if (!all.count(GetParam())) all[GetParam()] = load(GetParam());
    return all[GetParam()];
  }
};

TEST_P(QuantizeModelTest, GptqBeatsRtnAndTheGapWidensAtThreeBits) {
  const RealModel& m = model();
  const double rtn4 = kld(m, method(QuantMethod::kRtn, 4, 32)), gptq4 = kld(m, method(QuantMethod::kGptq, 4, 32));
  const double rtn3 = kld(m, method(QuantMethod::kRtn, 3, 32)), gptq3 = kld(m, method(QuantMethod::kGptq, 3, 32));
  std::printf("%s KLD g32: rtn4 %.5f gptq4 %.5f | rtn3 %.5f gptq3 %.5f\n", GetParam(), rtn4, gptq4, rtn3, gptq3);
  EXPECT_LT(gptq4, rtn4);
  EXPECT_LT(gptq3, rtn3);
  EXPECT_GT(rtn3 - gptq3, rtn4 - gptq4);
}

// AWQ's own setting (zero points, AutoAWQ's default) against RTN with the same zero points.
TEST_P(QuantizeModelTest, AwqBeatsRtnAtFourBits) {
  const RealModel& m = model();
  const double rtn4 = kld(m, method(QuantMethod::kRtn, 4, 32, true)), awq4 = kld(m, method(QuantMethod::kAwq, 4, 32, true));
  std::printf("%s KLD g32 asym: rtn4 %.5f awq4 %.5f\n", GetParam(), rtn4, awq4);
  EXPECT_LT(awq4, rtn4);
}

// W8A8 (per-token int8 activations) against W8A16 RTN. Measured here: SmoothQuant's own recipe
// (RTN int8 weights) is 2.6-3.1x the W8A16 KLD: these models have no outlier channels for it to
// migrate (max/rms of the linear inputs is 2.4-6) and most of the excess is the int8 ffn_down input
// (next test). After the Hadamard rotation, whose online transform spreads that input, it is
// 1.9-2.0x (stories260K) and 2.3x (aidreams260K); with GPTQ weights on top (SmoothQuant + GPTQ,
// llm-compressor's W8A8 recipe) 1.6x and 1.8x. Asserted: the rotation lowers the W8A8 KLD, as
// QuaRot reports, and the full recipe is within the 2x of W8A16 RTN.
TEST_P(QuantizeModelTest, SmoothQuantW8A8AgainstW8A16Rtn) {
  const RealModel& m = model();
  const double w8a16 = kld(m, method(QuantMethod::kRtn, 8, -1));
  const double sq = kld(m, method(QuantMethod::kSmoothQuant, 8, -1));
  QuantizeOptions rotated = method(QuantMethod::kSmoothQuant, 8, -1);
  rotated.rotate_hadamard = true;
  const double sq_rotated = kld(m, rotated);
  QuantizeOptions recipe = method(QuantMethod::kGptq, 8, -1);
  recipe.act_bits = 8;
  recipe.smooth = true;
  recipe.rotate_hadamard = true;
  const double sq_gptq = kld(m, recipe);
  std::printf("%s KLD: rtn W8A16 %.6f | smoothquant W8A8 %.6f (%.2fx) | + hadamard %.6f (%.2fx) | + gptq weights %.6f (%.2fx)\n",
              GetParam(), w8a16, sq, sq / w8a16, sq_rotated, sq_rotated / w8a16, sq_gptq, sq_gptq / w8a16);
  EXPECT_GT(sq, w8a16);
  EXPECT_LT(sq_rotated, sq);
  EXPECT_LT(sq_gptq, 2.0 * w8a16);
}

// Where SmoothQuant W8A8's excess KLD over W8A16 comes from: the same model with int8
// activations kept only for ffn_down (its input silu(gate)·up, 172 wide, is per-token
// heavy-tailed, which per-channel smoothing cannot flatten). Measured here: that one input
// carries about 70% of the excess on both models. Asserted: more than half.
TEST_P(QuantizeModelTest, SmoothQuantW8A8ErrorIsMostlyTheFfnDownInput) {
  const RealModel& m = model();
  const double w8a16 = kld(m, method(QuantMethod::kRtn, 8, -1));
  const ModelFile sq = quantized(m, method(QuantMethod::kSmoothQuant, 8, -1));
  ModelFile down_only = sq;
  for (auto& [name, t] : down_only.tensors) {
    if (t.dtype == DType::kInt && name.find("ffn_down") == std::string::npos) t.quant.act_bits = 16;
  }
  const double all = kld_of(m, sq), down = kld_of(m, std::move(down_only));
  std::printf("%s KLD: rtn W8A16 %.6f; smoothquant W8A8's excess over it %.6f, with int8 activations on ffn_down only %.6f (%.0f%%)\n",
              GetParam(), w8a16, all - w8a16, down - w8a16, 100.0 * (down - w8a16) / (all - w8a16));
  EXPECT_GT(down - w8a16, 0.5 * (all - w8a16));
}

TEST_P(QuantizeModelTest, CoarserGranularityLosesMore) {
  const RealModel& m = model();
  const double tensor = kld(m, method(QuantMethod::kRtn, 4, 0)), channel = kld(m, method(QuantMethod::kRtn, 4, -1));
  const double group = kld(m, method(QuantMethod::kRtn, 4, 32));
  std::printf("%s KLD 4-bit rtn: per-tensor %.5f per-channel %.5f group-32 %.5f\n", GetParam(), tensor, channel, group);
  EXPECT_GT(tensor, channel);
  EXPECT_GT(channel, group);
}

// Every method end to end with a short calibration (512 tokens) and a short evaluation (two
// windows): the whole pipeline under the sanitizers, which skip the full-text comparisons above
// (scripts/test.sh). Bounds: 4-bit methods measure 0.11-0.17 nats here, 8-bit ones
// 0.001-0.01; a broken method lands above 1.
TEST(QuantizeEveryMethod, RunsEndToEndAndStaysClose) {
  const RealModel m = load("stories260K/stories260K.bin");
  struct Case {
    const char* name;
    QuantizeOptions o;
    double max_kld;
  };
  std::vector<Case> cases = {{"rtn 4-bit g32", method(QuantMethod::kRtn, 4, 32), 0.4},
                             {"gptq 4-bit g32", method(QuantMethod::kGptq, 4, 32), 0.4},
                             {"awq 4-bit g32 asym", method(QuantMethod::kAwq, 4, 32, true), 0.4},
                             {"smoothquant W8A8", method(QuantMethod::kSmoothQuant, 8, -1), 0.02},
                             {"llm-int8", method(QuantMethod::kLlmInt8, 8, -1), 0.02},
                             {"fp8 e4m3", method(QuantMethod::kFp8, 8, -1), 0.05},
                             {"gptq W8A8 + smoothing", method(QuantMethod::kGptq, 8, -1), 0.02},
                             {"gptq W4A8 + hadamard", method(QuantMethod::kGptq, 4, 32), 0.4}};
  cases[cases.size() - 2].o.act_bits = 8;
  cases[cases.size() - 2].o.smooth = true;
  cases.back().o.rotate_hadamard = true;
  cases.back().o.act_bits = 8;
  for (Case& c : cases) {
    c.o.calib_tokens = 512;
    const double d = kld(m, c.o, 2);
    std::printf("%s: KLD %.5f over 512 tokens\n", c.name, d);
    EXPECT_GT(d, 0.0) << c.name;
    EXPECT_LT(d, c.max_kld) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, QuantizeModelTest,
                         ::testing::Values("stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"),
                         [](const auto& info) {
                           const std::string p = info.param;
                           return p.substr(0, p.find('/'));
                         });

}  // namespace
}  // namespace peregrine

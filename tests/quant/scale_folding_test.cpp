// fold_input_scales on the real stories260K (GQA) and aidreams260K (MHA), and a random-weight
// Qwen2 (MHA, Q/K/V biases): random positive
// per-channel scales folded into a layer leave the model's teacher-forced logits unchanged up to
// f32 rounding for every input the model supports, the tensors change as documented, and the
// unsupported inputs and bad scales are refused without touching the model.
#include "peregrine/quant/scale_folding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "peregrine/core/prng.h"
#include "peregrine/quant/rotate_model.h"
#include "smoothing_test_util.h"
#include "test_paths.h"

namespace peregrine {
namespace {

// Folding rescales products by s_j · (1 / s_j): each changes a value by a few f32 ulps, and the
// forward's sums and softmaxes carry that to the logits. Measured: at most 1.6e-6 of the logits'
// scale (13 ε, ε = 2^-23) over every input of both models; the bound, 128 ε, leaves room for
// other SIMD targets' summation orders.
constexpr double kMaxLogitChange = 128 * std::numeric_limits<float>::epsilon();

constexpr LinearInput kInputs[] = {LinearInput::kAttention, LinearInput::kAttentionOutput, LinearInput::kFfn,
                                   LinearInput::kFfnDown};

std::int64_t width(const ModelConfig& c, LinearInput input) {
  switch (input) {
    case LinearInput::kAttention:
    case LinearInput::kFfn: return c.dim;
    case LinearInput::kAttentionOutput: return c.n_heads * c.head_dim;
    case LinearInput::kFfnDown: return c.ffn_dim;
  }
  return 0;
}

// Scales log-uniform on [1/4, 4].
std::vector<float> random_scales(std::int64_t n, std::uint64_t seed) {
  std::vector<float> s(static_cast<std::size_t>(n));
  Xoshiro256Plus(seed).fill_uniform(s, std::log(4.0f));
  for (float& v : s) v = std::exp(v);
  return s;
}

// Folds fresh random scales into every layer's `input` and compares the logits with `reference`.
void expect_folding_keeps_logits(const std::string& path, LinearInput input, std::span<const std::int32_t> tokens,
                                 std::span<const float> reference, ThreadPool& pool) {
  FloatModel m = test::load_float_model(path);
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    const Status st = fold_input_scales(m, l, input, random_scales(width(m.config(), input), 100 + static_cast<std::uint64_t>(l)));
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  const double change = test::max_relative_diff(reference, test::model_logits(m, tokens, pool));
  std::printf("[ fold ] %s input %d: max logit change %.2e of the logit scale\n", path.c_str(), static_cast<int>(input),
              change);
  EXPECT_LE(change, kMaxLogitChange) << "input " << static_cast<int>(input);
}

void expect_every_supported_input_keeps_logits(const std::string& path, int n_supported) {
  ThreadPool pool(2);
  const FloatModel original = test::load_float_model(path);
  const auto tokens = test::story_tokens(original);
  ASSERT_GT(tokens.size(), 100u);
  const auto reference = test::model_logits(original, tokens, pool);
  int supported = 0;
  for (const LinearInput input : kInputs) {
    if (!can_fold_input_scales(original, input)) continue;
    ++supported;
    expect_folding_keeps_logits(path, input, tokens, reference, pool);
  }
  EXPECT_EQ(supported, n_supported);
}

TEST(ScaleFolding, RandomScalesKeepStoriesLogits) {
  // GQA (8 heads / 4 KV heads): the attention output cannot take scales.
  expect_every_supported_input_keeps_logits(test::stories260k_bin(), 3);
}

TEST(ScaleFolding, RandomScalesKeepAidreamsLogits) {
  // MHA: all four inputs.
  expect_every_supported_input_keeps_logits(test::aidreams260k_bin(), 4);
}

TEST(ScaleFolding, RandomScalesKeepQwen2Logits) {
  // MHA with Q/K/V biases: the attention output's scales divide attn_v's bias with its rows.
  expect_every_supported_input_keeps_logits(test::testdata_dir() + "/gguf-f32-qwen2.gguf", 4);
}

// The Gemma 2 GGUF test model (norms stored as 1 + w) in its Hugging Face form: norms w applied
// as 1 + w (norm_weight_offset 1), the same model.
FloatModel gemma2_with_offset_norms() {
  FloatModel m = test::load_float_model(test::testdata_dir() + "/gguf-f32-gemma2.gguf");
  m.config().norm_weight_offset = 1.0f;
  std::vector<std::string> norms = {"output_norm.weight"};
  for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
    for (const char* n : {"attn_norm", "ffn_norm", "post_attention_norm", "post_ffw_norm"}) norms.push_back(layer_tensor_name(l, n));
  }
  for (const std::string& name : norms) {
    for (float& w : m.tensor(name)) w -= 1.0f;
  }
  return m;
}

TEST(ScaleFolding, RandomScalesKeepGemma2LogitsWithNormsAppliedAsOnePlusW) {
  // A norm applied as 1 + g takes a scale as (1 + g) / s - 1; GQA: the norms' inputs and ffn_down's.
  ThreadPool pool(2);
  const FloatModel original = gemma2_with_offset_norms();
  const auto tokens = test::story_tokens(original);
  ASSERT_GT(tokens.size(), 100u);
  const auto reference = test::model_logits(original, tokens, pool);
  for (const LinearInput input : {LinearInput::kAttention, LinearInput::kFfn, LinearInput::kFfnDown}) {
    FloatModel m = gemma2_with_offset_norms();
    for (std::int64_t l = 0; l < m.config().n_layers; ++l) {
      ASSERT_TRUE(fold_input_scales(m, l, input, random_scales(width(m.config(), input), 200 + static_cast<std::uint64_t>(l))).is_ok());
    }
    const double change = test::max_relative_diff(reference, test::model_logits(m, tokens, pool));
    std::printf("[ fold ] gemma2 (1 + w norms) input %d: max logit change %.2e of the logit scale\n", static_cast<int>(input), change);
    EXPECT_LE(change, kMaxLogitChange) << "input " << static_cast<int>(input);
  }
  FloatModel rotated = gemma2_with_offset_norms();  // post-block norms: no rotation
  const Status st = rotate_model_hadamard(rotated, 1);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
}

// The documented edits: readers' columns × s, the producer (norm weight or rows of ffn_up /
// attn_v) ÷ s, nothing else.
TEST(ScaleFolding, ScalesReadersColumnsAndDividesTheProducer) {
  const FloatModel original = test::load_float_model(test::aidreams260k_bin());
  struct Case {
    LinearInput input;
    const char* producer;
  };
  for (const Case c : {Case{LinearInput::kAttention, "attn_norm"}, Case{LinearInput::kAttentionOutput, "attn_v"},
                       Case{LinearInput::kFfn, "ffn_norm"}, Case{LinearInput::kFfnDown, "ffn_up"}}) {
    FloatModel m = test::load_float_model(test::aidreams260k_bin());
    const auto s = random_scales(width(m.config(), c.input), 7);
    ASSERT_TRUE(fold_input_scales(m, 2, c.input, s).is_ok());
    const std::size_t w = s.size();
    for (const char* reader : linear_names(c.input)) {
      const std::string name = layer_tensor_name(2, reader);
      const std::span<const float> before = original.tensor(name), after = m.tensor(name);
      for (std::size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], before[i] * s[i % w]) << name << " " << i;
    }
    const std::string producer = layer_tensor_name(2, c.producer);
    const std::span<const float> before = original.tensor(producer), after = m.tensor(producer);
    const std::size_t cols = before.size() / w;
    for (std::size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], before[i] / s[i / cols]) << producer << " " << i;
    for (const std::string& name : m.names()) {
      if (name.rfind("blk.2.", 0) == 0) continue;
      const std::span<const float> a = original.tensor(name), b = m.tensor(name);
      ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << name << " changed";
    }
  }
}

void expect_model_unchanged(const FloatModel& a, const FloatModel& b) {
  for (const std::string& name : a.names()) {
    const auto x = a.tensor(name), y = b.tensor(name);
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << name << " changed";
  }
}

TEST(ScaleFolding, GqaAttentionOutputIsUnsupported) {
  const FloatModel original = test::load_float_model(test::stories260k_bin());
  FloatModel m = test::load_float_model(test::stories260k_bin());
  ASSERT_EQ(m.config().n_heads, 8);
  ASSERT_EQ(m.config().n_kv_heads, 4);
  EXPECT_FALSE(can_fold_input_scales(m, LinearInput::kAttentionOutput));
  const Status st = fold_input_scales(m, 0, LinearInput::kAttentionOutput, std::vector<float>(64, 2.0f));
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
  expect_model_unchanged(original, m);
}

TEST(ScaleFolding, FfnDownAfterTheOnlineHadamardIsUnsupported) {
  FloatModel m = test::load_float_model(test::stories260k_bin());
  ASSERT_TRUE(rotate_model_hadamard(m, 1).is_ok());
  EXPECT_FALSE(can_fold_input_scales(m, LinearInput::kFfnDown));
  EXPECT_TRUE(can_fold_input_scales(m, LinearInput::kAttention));
  const Status st = fold_input_scales(m, 0, LinearInput::kFfnDown, std::vector<float>(172, 2.0f));
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
}

TEST(ScaleFolding, BadScalesOrLayersAreInvalidArguments) {
  const FloatModel original = test::load_float_model(test::stories260k_bin());
  FloatModel m = test::load_float_model(test::stories260k_bin());
  const std::vector<float> ok(64, 1.5f);
  auto with = [&](std::size_t j, float v) {
    std::vector<float> s = ok;
    s[j] = v;
    return s;
  };
  const std::vector<std::vector<float>> bad_scales = {
      std::vector<float>(63, 1.5f), std::vector<float>(172, 1.5f), with(3, 0.0f), with(0, -1.0f),
      with(63, std::numeric_limits<float>::quiet_NaN()), with(5, std::numeric_limits<float>::infinity())};
  for (const auto& s : bad_scales) {
    const Status st = fold_input_scales(m, 1, LinearInput::kAttention, s);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.message();
  }
  for (const std::int64_t layer : {std::int64_t{-1}, std::int64_t{5}}) {
    const Status st = fold_input_scales(m, layer, LinearInput::kFfn, ok);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.message();
  }
  expect_model_unchanged(original, m);
}

}  // namespace
}  // namespace peregrine

// Peregrine's F32 logits against the independent PyTorch reference (tools/reference.py) on
// every model in build/testdata/manifest.json: stories260K (.bin, .gguf) and random-weight
// models in all three formats (GQA, MQA, tied/untied, F16/BF16/Q8_0/Q4_0 storage, scaled RoPE, and
// the Qwen2 / Qwen3 / Phi-3 / Gemma 2 families and a Mistral-style sliding window shorter than the
// 24 test tokens, in GGUF and HF form). For Q8_0/Q4_0
// weights the reference rounds each matmul input to 8-bit blocks as the engine's integer
// kernels do (kernels/cpu/matmul/quantize_activations.h; reference.py --act-quant), so the same f32
// tolerance applies (that rounding itself moves these logits by up to 0.25). Models whose RoPE
// scaling follows the sequence length (LongRoPE, dynamic NTK; model/spec/rope_scaling.h) carry a
// second reference, the logits of a token-by-token decode, which crosses their original
// context of 16 positions, and a "-short" twin entry whose prompt stays within it. Entries with
// a "lora" carry a random LoRA adapter on all seven projections, written independently of the
// engine in Hugging Face PEFT's layout or llama.cpp's LoRA GGUF layout (tools/make_test_models.py)
// for GGUF / llama2.c / HF bases, a Q4_0 one and a Qwen2 one among them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "peregrine/model/lora_adapter.h"
#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/model/lora_set.h"
#include "parity_cases.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

constexpr float kTolerance = 1e-4f;

using test::Case;
using test::load_cases;

float max_abs_diff(const std::vector<float>& a, const float* b) {
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(LogitsParity, ManifestCoversEveryFormat) {
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 32u) << "run tools/make_test_models.py --out " << test::testdata_dir();
  EXPECT_GE(std::count_if(cases.begin(), cases.end(), [](const Case& c) { return !c.lora.empty(); }), 5);
}


// One batched prefill with logits on every row, then the same tokens one decode step at a time
// (against the decode reference where the case has one); with the case's LoRA adapter, if any,
// applied unmerged (model/lora_set.h) as the reference applies it.
void check_case(const Case& c, ThreadPool& pool) {
    auto file = load_model_file(c.model);
    ASSERT_TRUE(file) << file.status().message();
    auto model = LlamaModel::create(std::move(*file));
    ASSERT_TRUE(model) << model.status().message();
    ASSERT_EQ(model->config().vocab_size, c.vocab);
    const auto n = static_cast<std::int32_t>(c.tokens.size());
    LoraSet lora;  // the case's adapter in slot 0, applied unmerged to every row
    if (!c.lora.empty()) {
      auto adapter = load_lora_adapter(c.lora, model->file());
      ASSERT_TRUE(adapter) << adapter.status().message();
      ASSERT_TRUE(lora.add_slot({{std::make_shared<const LoraAdapter>(std::move(*adapter)), 1.0f}}));
    }
    const auto forward = [&](const Batch& b, KvCache& cache, std::vector<float>& out) {
      Batch rows = b;
      if (!c.lora.empty()) rows.lora_slots.assign(rows.tokens.size(), 0);
      return model->forward(rows, cache, out, pool, 0, nullptr, c.lora.empty() ? nullptr : &lora);
    };

    KvCache prefill_cache = test::make_kv_cache(model->config(), n);
    Batch batch;
    for (std::int32_t i = 0; i < n; ++i) batch.add(c.tokens[i], i, 0, true);
    std::vector<float> logits;
    ASSERT_TRUE(forward(batch, prefill_cache, logits).is_ok());
    const float prefill_diff = max_abs_diff(logits, c.logits.data());
    EXPECT_LE(prefill_diff, kTolerance);

    KvCache decode_cache = test::make_kv_cache(model->config(), n);
    const std::vector<float>& decode_want = c.decode_logits.empty() ? c.logits : c.decode_logits;
    float decode_diff = 0.0f;
    for (std::int32_t i = 0; i < n; ++i) {
      batch.clear();
      batch.add(c.tokens[i], i, 0, true);
      ASSERT_TRUE(forward(batch, decode_cache, logits).is_ok());
      decode_diff = std::max(decode_diff, max_abs_diff(logits, &decode_want[static_cast<std::size_t>(i * c.vocab)]));
    }
    EXPECT_LE(decode_diff, kTolerance);
    std::printf("[ parity ] %-24s prefill max|dlogit| %.2e  decode max|dlogit| %.2e\n", c.name.c_str(),
                static_cast<double>(prefill_diff), static_cast<double>(decode_diff));
}

TEST(LogitsParity, PrefillAndDecodeMatchReference) {
  // The reference multiplies BF16 weights by f32 activations. (Rounding them to BF16, the
  // default, moves a logit by up to ~0.03 here wherever f32 noise puts an activation on the
  // other side of a rounding boundary; Bf16ActivationsTest measures that mode on a real model.)
  const ScopedBf16Activations exact(Bf16Activations::kF32);
  ThreadPool pool(2);
  for (const Case& c : load_cases()) {
    SCOPED_TRACE(c.name);
    check_case(c, pool);
  }
}

// A length-following RoPE scaling applies per sequence: one ragged prefill of a prompt within
// the original context (sequence 7) and one past it (sequence 3) gives each sequence the logits
// of its own forward, short frequencies for the one and long / NTK-scaled for the other.
TEST(LogitsParity, RaggedBatchScalesEachSequenceByItsLength) {
  ThreadPool pool(2);
  const auto cases = load_cases();
  int checked = 0;
  for (const Case& long_case : cases) {
    const auto twin = std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.name == long_case.name + "-short"; });
    if (twin == cases.end()) continue;
    SCOPED_TRACE(long_case.name);
    auto file = load_model_file(long_case.model);
    ASSERT_TRUE(file) << file.status().message();
    auto model = LlamaModel::create(std::move(*file));
    ASSERT_TRUE(model) << model.status().message();
    Batch batch;
    for (std::size_t i = 0; i < twin->tokens.size(); ++i) batch.add(twin->tokens[i], static_cast<std::int32_t>(i), 7, true);
    for (std::size_t i = 0; i < long_case.tokens.size(); ++i) batch.add(long_case.tokens[i], static_cast<std::int32_t>(i), 3, true);
    KvCache cache = test::make_kv_cache(model->config(), static_cast<std::int64_t>(long_case.tokens.size()), 2);
    std::vector<float> logits;
    ASSERT_TRUE(model->forward(batch, cache, logits, pool).is_ok());
    const auto split = logits.begin() + static_cast<std::ptrdiff_t>(twin->logits.size());
    EXPECT_LE(max_abs_diff(std::vector<float>(logits.begin(), split), twin->logits.data()), kTolerance);
    EXPECT_LE(max_abs_diff(std::vector<float>(split, logits.end()), long_case.logits.data()), kTolerance);
    ++checked;
  }
  EXPECT_GE(checked, 3) << "the longrope (HF, GGUF) and dynamic test models";
}

}  // namespace
}  // namespace peregrine

// Peregrine's F32 logits against the independent PyTorch reference (tools/reference.py) on
// every model in build/testdata/manifest.json: stories260K (.bin, .gguf) and random-weight
// models in all three formats (GQA, MQA, tied/untied, F16/BF16/Q8_0/Q4_0 storage, scaled RoPE, and
// the Qwen2 / Qwen3 / Phi-3 / Gemma 2 families and a Mistral-style sliding window shorter than the
// 24 test tokens, in GGUF and HF form). For Q8_0/Q4_0
// weights the reference rounds each matmul input to 8-bit blocks as the engine's integer
// kernels do (kernels/cpu/quantize_activations.h; reference.py --act-quant), so the same f32
// tolerance applies (that rounding itself moves these logits by up to 0.25).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "peregrine/model/llama_model.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

constexpr float kTolerance = 1e-4f;

struct Case {
  std::string name, model;
  std::vector<std::int32_t> tokens;
  std::vector<float> logits;  // [tokens, vocab]
  std::int64_t vocab = 0;
};

std::vector<Case> load_cases() {
  const std::string dir = test::testdata_dir();
  std::ifstream in(dir + "/manifest.json");
  std::vector<Case> cases;
  if (!in) return cases;
  for (const auto& e : nlohmann::json::parse(in)) {
    Case c;
    c.name = e["name"];
    const std::string model = e["model"];
    c.model = model.starts_with("/") ? model : dir + "/" + model;
    c.tokens = e["tokens"].get<std::vector<std::int32_t>>();
    c.vocab = e["vocab"];
    c.logits.resize(c.tokens.size() * static_cast<std::size_t>(c.vocab));
    std::ifstream lf(dir + "/" + e["logits"].get<std::string>(), std::ios::binary);
    lf.read(reinterpret_cast<char*>(c.logits.data()), static_cast<std::streamsize>(c.logits.size() * sizeof(float)));
    cases.push_back(std::move(c));
  }
  return cases;
}

float max_abs_diff(const std::vector<float>& a, const float* b) {
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(LogitsParity, ManifestCoversEveryFormat) {
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 32u) << "run tools/make_test_models.py --out " << test::testdata_dir();
}


// One batched prefill with logits on every row, then the same tokens one decode step at a time.
void check_case(const Case& c, ThreadPool& pool) {
    auto file = load_model_file(c.model);
    ASSERT_TRUE(file) << file.status().message();
    auto model = LlamaModel::create(std::move(*file));
    ASSERT_TRUE(model) << model.status().message();
    ASSERT_EQ(model->config().vocab_size, c.vocab);
    const auto n = static_cast<std::int32_t>(c.tokens.size());

    KvCache prefill_cache = test::make_kv_cache(model->config(), n);
    Batch batch;
    for (std::int32_t i = 0; i < n; ++i) batch.add(c.tokens[i], i, 0, true);
    std::vector<float> logits;
    ASSERT_TRUE(model->forward(batch, prefill_cache, logits, pool).is_ok());
    const float prefill_diff = max_abs_diff(logits, c.logits.data());
    EXPECT_LE(prefill_diff, kTolerance);

    KvCache decode_cache = test::make_kv_cache(model->config(), n);
    float decode_diff = 0.0f;
    for (std::int32_t i = 0; i < n; ++i) {
      batch.clear();
      batch.add(c.tokens[i], i, 0, true);
      ASSERT_TRUE(model->forward(batch, decode_cache, logits, pool).is_ok());
      decode_diff = std::max(decode_diff, max_abs_diff(logits, &c.logits[static_cast<std::size_t>(i * c.vocab)]));
    }
    EXPECT_LE(decode_diff, kTolerance);
    std::printf("[ parity ] %-24s prefill max|dlogit| %.2e  decode max|dlogit| %.2e\n", c.name.c_str(),
                static_cast<double>(prefill_diff), static_cast<double>(decode_diff));
}

TEST(LogitsParity, PrefillAndDecodeMatchReference) {
  ThreadPool pool(2);
  for (const Case& c : load_cases()) {
    SCOPED_TRACE(c.name);
    check_case(c, pool);
  }
}

}  // namespace
}  // namespace peregrine

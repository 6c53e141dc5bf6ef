// The CUDA backend (backend/cuda_forward.h) against the CPU engine: the same ragged batches
// (prefills of 40 and 5 rows, a mixed step with a 12-row prefill beside two decodes, 30
// three-sequence decode steps, a 20-row chunk continuing a cache) through both, logits compared
// on every row; KV blocks of 7 positions so tables cross blocks mid-sequence. Real models:
// stories260K converted to every dtype the engine writes, and llama.cpp's own tiny-llama-256
// files (kquant-test) in F16 / Q8_0 / Q4_0 / K-quant mixes; the stories260K greedy text must
// equal llama2.c's. Without a CUDA device the GPU tests skip, saying why, and kCuda fails with
// one clean error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "peregrine/backend/cuda_forward.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/convert_model.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

std::string kquant(const std::string& type) { return test::shared_dir() + "/models/kquant-test/tiny-llama-256." + type + ".gguf"; }

#define SKIP_WITHOUT_CUDA()                              \
  do {                                                   \
    std::string why;                                     \
    if (!cuda_device_available(&why)) GTEST_SKIP() << why; \
  } while (0)

/// `path` loaded, its matrices converted to `dtype` (nullopt: as stored), as a model placed
/// per `placement`.
LlamaModel load(const std::string& path, std::optional<DType> dtype, WeightPlacement placement) {
  auto file = load_model_file(path);
  EXPECT_TRUE(file) << file.status().message();
  if (dtype) {
    auto converted = convert_model_weights(*file, *dtype, nullptr);
    EXPECT_TRUE(converted) << converted.status().message();
  }
  auto model = LlamaModel::create(std::move(*file), placement);
  EXPECT_TRUE(model) << model.status().message();
  return std::move(*model);
}

/// The test's batches over a vocabulary of `vocab` tokens (seeded random ids).
std::vector<Batch> schedule(std::int64_t vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> tok(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<Batch> steps;
  auto rows = [&](Batch& b, std::int32_t seq, std::int32_t first, std::int32_t n) {
    for (std::int32_t i = 0; i < n; ++i) b.add(tok(rng), first + i, seq, true);
  };
  rows(steps.emplace_back(), 0, 0, 40);  // prefill, more rows than the GEMV takes
  rows(steps.emplace_back(), 1, 0, 5);   // a short prefill: GEMV and graph path
  Batch& mixed = steps.emplace_back();   // decodes beside a prefill, 14 rows
  rows(mixed, 0, 40, 1);
  rows(mixed, 1, 5, 1);
  rows(mixed, 2, 0, 12);
  for (std::int32_t t = 0; t < 30; ++t) {  // three sequences decoding together
    Batch& b = steps.emplace_back();
    rows(b, 0, 41 + t, 1);
    rows(b, 1, 6 + t, 1);
    rows(b, 2, 12 + t, 1);
  }
  rows(steps.emplace_back(), 1, 36, 20);  // a chunk continuing a cache
  return steps;
}

/// Every step's logits, concatenated, with K/V in `kv` (blocks of 7 positions).
std::vector<float> run(const LlamaModel& m, const std::vector<Batch>& steps, DType kv) {
  auto cache = KvCache::create(m.config().kv_shape(), {64, 7, kv});
  EXPECT_TRUE(cache) << cache.status().message();
  ThreadPool pool(2);
  std::vector<float> all, logits;
  for (const Batch& b : steps) {
    const Status st = m.forward(b, *cache, logits, pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

struct Diff {
  double rel = 0.0;        // max |cuda - cpu| / max |cpu|
  double top1 = 0.0;       // share of rows with the same argmax
};

Diff compare(const std::vector<float>& cpu, const std::vector<float>& gpu, std::int64_t vocab) {
  Diff d;
  EXPECT_EQ(cpu.size(), gpu.size());
  double max_ref = 0.0, max_err = 0.0;
  std::int64_t same = 0;
  const std::int64_t rows = static_cast<std::int64_t>(cpu.size()) / vocab;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* a = &cpu[r * vocab];
    const float* b = &gpu[r * vocab];
    for (std::int64_t j = 0; j < vocab; ++j) {
      EXPECT_TRUE(std::isfinite(b[j]));
      max_ref = std::max(max_ref, std::abs(static_cast<double>(a[j])));
      max_err = std::max(max_err, std::abs(static_cast<double>(a[j]) - b[j]));
    }
    same += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
  }
  d.rel = max_err / max_ref;
  d.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return d;
}

struct Case {
  std::string name;
  std::string path;
  std::optional<DType> dtype;  // conversion on load, or as stored
  DType kv;
  double max_rel;  // bound on Diff::rel (see below)
};

// Bounds on max |Δlogit| / max |logit| against the CPU engine. Decode-sized steps multiply
// the same values in f32 (float weights) or the same Q8_0 activation blocks (Q8_0 / Q4_0) on
// both sides, so the bound is set by the prefill steps, where cuBLAS takes the activations
// rounded to the weight's 16-bit type (f16: 2^-11 relative per value, bf16: 2^-8) and the
// quantized weights decoded to f16, against the CPU's f32 (float weights) or Q8_0 (2^-8 of a
// block's max) activations; f16 K/V rounds K and V (2^-11) on both sides.
// F32 is f32 throughout, in another summation order.
std::vector<Case> cases() {
  return {
      {"stories260K f32", test::stories260k_path(), DType::kF32, DType::kF32, 1e-4},
      {"stories260K f32, f16 K/V", test::stories260k_path(), DType::kF32, DType::kF16, 1e-3},
      {"stories260K f16", test::stories260k_path(), DType::kF16, DType::kF32, 1e-2},
      {"stories260K bf16", test::stories260k_path(), DType::kBF16, DType::kF32, 5e-2},
      {"stories260K q8_0", test::stories260k_path(), DType::kQ8_0, DType::kF32, 5e-2},
      {"stories260K q4_0", test::stories260k_path(), DType::kQ4_0, DType::kF16, 5e-2},
      {"tiny-llama-256 F16", kquant("F16"), std::nullopt, DType::kF16, 1e-2},
      {"tiny-llama-256 Q8_0", kquant("Q8_0"), std::nullopt, DType::kF32, 5e-2},
      {"tiny-llama-256 Q4_0", kquant("Q4_0"), std::nullopt, DType::kF32, 5e-2},
      {"tiny-llama-256 Q4_K_M", kquant("Q4_K_M"), std::nullopt, DType::kF32, 5e-2},
      {"tiny-llama-256 IQ4_XS", kquant("IQ4_XS"), std::nullopt, DType::kF32, 5e-2},
  };
}

TEST(CudaForward, UnavailableIsOneCleanError) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  auto model = LlamaModel::create(std::move(*file), WeightPlacement::kCuda);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(model.status().message(), why);
}

TEST(CudaForward, RefusesFamiliesItDoesNotRun) {
  // Refused before any device is touched, so this runs everywhere.
  for (const auto& [file, feature] : {std::pair{"gguf-f32-qwen2.gguf", "Q/K/V biases"}, {"gguf-f32-qwen3.gguf", "Q/K norms"},
                                      {"gguf-f32-gemma2.gguf", "GeGLU"}, {"gguf-f32-mixtral.gguf", "Mixture-of-Experts"}}) {
    auto f = load_model_file(test::testdata_dir() + "/" + file);
    ASSERT_TRUE(f) << f.status().message();
    auto model = LlamaModel::create(std::move(*f), WeightPlacement::kCuda);
    ASSERT_FALSE(model) << file;
    EXPECT_EQ(model.status().code(), ErrorCode::kUnsupported) << file;
    EXPECT_NE(model.status().message().find(feature), std::string::npos) << model.status().message();
  }
}

TEST(CudaForward, LogitsMatchCpuOnEveryWeightType) {
  SKIP_WITHOUT_CUDA();
  for (const Case& c : cases()) {
    const LlamaModel cpu = load(c.path, c.dtype, WeightPlacement::kHugePages);
    const LlamaModel gpu = load(c.path, c.dtype, WeightPlacement::kCuda);
    const std::vector<Batch> steps = schedule(cpu.config().vocab_size);
    const Diff d = compare(run(cpu, steps, c.kv), run(gpu, steps, c.kv), cpu.config().vocab_size);
    std::printf("%-28s max |dlogit| / max |logit| %.2e (bound %.0e), same argmax %.1f%% of rows\n", c.name.c_str(), d.rel,
                c.max_rel, 100.0 * d.top1);
    EXPECT_LE(d.rel, c.max_rel) << c.name;
  }
}

TEST(CudaForward, TestdataFamiliesMatchCpu) {
  // Dense families the GPU runs: a sliding window (Mistral), Llama 3.1 rope_freqs, Phi-3's
  // LongRoPE (per-sequence divisors, NeoX pairs) — RoPE tables come from the host.
  SKIP_WITHOUT_CUDA();
  for (const char* file : {"gguf-f32-mistral-swa.gguf", "gguf-f32-llama3-rope.gguf", "gguf-f32-phi3-longrope.gguf", "gguf-f16-gqa.gguf"}) {
    const std::string path = test::testdata_dir() + "/" + file;
    const LlamaModel cpu = load(path, std::nullopt, WeightPlacement::kHugePages);
    const LlamaModel gpu = load(path, std::nullopt, WeightPlacement::kCuda);
    const std::vector<Batch> steps = schedule(cpu.config().vocab_size);
    const Diff d = compare(run(cpu, steps, DType::kF32), run(gpu, steps, DType::kF32), cpu.config().vocab_size);
    std::printf("%-28s max |dlogit| / max |logit| %.2e, same argmax %.1f%% of rows\n", file, d.rel, 100.0 * d.top1);
    EXPECT_LE(d.rel, 1e-2) << file;
  }
}

TEST(CudaForward, StoriesGreedyTextIsLlama2cs) {
  // 300 tokens run past llama2.c's published text (565 characters), which must be its start;
  // the whole text must be the CPU engine's.
  SKIP_WITHOUT_CUDA();
  const std::string reference = test::stories260k_reference_text();
  for (const auto& [dtype, kv] : {std::pair{DType::kF32, DType::kF32}, {DType::kF16, DType::kF16}}) {
    const std::string gpu = test::stories260k_greedy_text(dtype, kv, WeightPlacement::kCuda);
    EXPECT_TRUE(gpu.starts_with(reference)) << gpu;
    EXPECT_EQ(gpu, test::stories260k_greedy_text(dtype, kv, WeightPlacement::kHugePages));
  }
}

}  // namespace
}  // namespace peregrine

// Issue #19's acceptance on the real models (stories260K, aidreams260K; calibration:
// tinystories_sample.txt; evaluation: all of tinystories_valid_excerpt.txt): Wanda and SparseGPT
// beat magnitude pruning at 50% and at 2:4, SparseGPT <= Wanda at 2:4 (mean KL divergence against
// the dense model); the structured methods write smaller models that run; a pruned model gives
// the same logits from the file it was written to as in memory, in every layout; bad requests
// give one clear error.
#include "peregrine/prune/prune_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "peregrine/formats/model_writer.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/prune/gguf_storage.h"
#include "peregrine/quant/quantize_model.h"
#include "real_model_eval.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using test::RealModel;

PruneOptions options(PruneMethod m, SparsityTarget t = {}, int quant_bits = 0) {
  PruneOptions o;
  o.method = m;
  o.target = t;
  o.quant_bits = quant_bits;
  o.calib_path = test::calibration_text_path();
  return o;
}

Expected<ModelFile> pruned(const RealModel& m, const PruneOptions& o) {
  ThreadPool pool(2);
  return prune_model(m.file, m.tok.get(), o, pool);
}

double kld(const RealModel& m, const PruneOptions& o) {
  auto p = pruned(m, o);
  EXPECT_TRUE(p.has_value()) << p.status().message();
  return p.has_value() ? test::mean_kld(m, std::move(*p)) : 1e9;
}

class PruneModelTest : public ::testing::TestWithParam<const char*> {
 protected:
  const RealModel& model() {
    static std::map<std::string, RealModel> all;
    if (!all.count(GetParam())) all[GetParam()] = test::load_real_model(GetParam());
    return all[GetParam()];
  }
};

TEST_P(PruneModelTest, WandaAndSparseGptBeatMagnitudeAndSparseGptLeadsAtTwoFour) {
  const RealModel& m = model();
  for (const SparsityTarget t : {SparsityTarget{0.5}, SparsityTarget{0.0, 2, 4}}) {
    const double mag = kld(m, options(PruneMethod::kMagnitude, t)), wanda = kld(m, options(PruneMethod::kWanda, t)),
                 sgpt = kld(m, options(PruneMethod::kSparseGpt, t));
    std::printf("%s %s KLD: magnitude %.4f wanda %.4f sparsegpt %.4f\n", GetParam(), t.describe().c_str(), mag, wanda, sgpt);
    EXPECT_LT(wanda, mag) << t.describe();
    EXPECT_LT(sgpt, mag) << t.describe();
    if (t.nm()) {
      EXPECT_LE(sgpt, wanda);
    }
  }
}

TEST_P(PruneModelTest, StructuredPruningWritesASmallerModelThatRuns) {
  const RealModel& m = model();
  const ModelConfig& c = m.file.config;
  PruneOptions drop = options(PruneMethod::kLayerDrop);
  drop.drop_layers = 1;
  auto dropped = pruned(m, drop);
  ASSERT_TRUE(dropped.has_value()) << dropped.status().message();
  EXPECT_EQ(dropped->config.n_layers, c.n_layers - 1);
  EXPECT_FALSE(dropped->tensors.count(layer_tensor_name(c.n_layers - 1, "attn_q")));
  PruneOptions width = options(PruneMethod::kWidth);
  width.ffn_keep = 0.75;
  width.heads_keep = 0.75;
  auto narrow = pruned(m, width);
  ASSERT_TRUE(narrow.has_value()) << narrow.status().message();
  EXPECT_EQ(narrow->config.ffn_dim, std::llround(0.75 * static_cast<double>(c.ffn_dim)));
  EXPECT_EQ(narrow->config.n_kv_heads, std::llround(0.75 * static_cast<double>(c.n_kv_heads)));
  EXPECT_EQ(narrow->config.n_heads, narrow->config.n_kv_heads * (c.n_heads / c.n_kv_heads));
  EXPECT_LT(narrow->weight_bytes(), m.file.weight_bytes());
  const double kld_drop = test::mean_kld(m, std::move(*dropped)), kld_width = test::mean_kld(m, std::move(*narrow));
  std::printf("%s KLD: layer-drop 1 %.4f, width 0.75 %.4f\n", GetParam(), kld_drop, kld_width);
  for (double k : {kld_drop, kld_width}) {
    EXPECT_GT(k, 0.0);
    EXPECT_LT(k, 5.0);  // the models still predict text: uniform over 512 tokens would be ~4-6 nats
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, PruneModelTest,
                         ::testing::Values("stories260K/stories260K.bin", "aidreams260K/aidreams260K.bin"));

// Logits of every position of a real text prefix.
std::vector<float> logits_of(ModelFile f, const std::vector<std::int32_t>& tokens) {
  auto model = LlamaModel::create(std::move(f));
  EXPECT_TRUE(model.has_value()) << model.status().message();
  if (!model.has_value()) return {};
  KvCache cache = test::make_kv_cache(model->config(), static_cast<std::int64_t>(tokens.size()));
  Batch b;
  for (std::size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
  ThreadPool pool(2);
  std::vector<float> logits;
  EXPECT_TRUE(model->forward(b, cache, logits, pool).is_ok());
  return logits;
}

TEST(PruneModel, LogitsFromTheWrittenFileEqualTheModelInMemory) {
  const RealModel m = test::load_real_model("stories260K/stories260K.bin");
  const std::vector<std::int32_t> tokens(m.eval_tokens.begin(), m.eval_tokens.begin() + 48);
  struct Case {
    PruneOptions o;
    bool gguf;
  };
  PruneOptions drop = options(PruneMethod::kLayerDrop);
  drop.drop_layers = 2;
  PruneOptions width = options(PruneMethod::kWidth);
  width.ffn_keep = 0.5;
  const Case cases[] = {{options(PruneMethod::kMagnitude, {0.5}), true},
                        {options(PruneMethod::kWanda, {0.0, 2, 4}), false},
                        {options(PruneMethod::kSparseGpt, {0.0, 2, 4}, 4), true},
                        {options(PruneMethod::kWanda, {0.0, 2, 4}), true},
                        {options(PruneMethod::kSparseGpt, {0.0, 4, 8}, 8), true},
                        {options(PruneMethod::kSparseGpt, {0.5}, 8), false},
                        {drop, true},
                        {width, false}};
  ThreadPool pool(2);
  for (const Case& c : cases) {
    PruneReport rep;
    auto p = prune_model(m.file, m.tok.get(), c.o, pool, &rep);
    ASSERT_TRUE(p.has_value()) << p.status().message();
    std::vector<std::string> notes;
    const std::string path = test::make_temp_dir() + (c.gguf ? "/pruned.gguf" : "/pruned");
    ModelFile in_memory = *p;
    if (c.gguf) {
      auto stored = gguf_storage(*p, c.o.target, rep.pruned_linears, notes);
      ASSERT_TRUE(stored.has_value()) << stored.status().message();
      in_memory = *stored;
      ASSERT_TRUE(save_gguf_model(in_memory, path, test::shared_dir() + "/models/stories260K/tok512.bin").is_ok());
    } else {
      ASSERT_TRUE(save_hf_model(in_memory, path, HfQuantLayout::kGptq, test::shared_dir() + "/models/stories260K/tok512.bin").is_ok());
    }
    auto loaded = load_model_file(path);
    ASSERT_TRUE(loaded.has_value()) << loaded.status().message();
    const auto a = logits_of(in_memory, tokens), b = logits_of(std::move(*loaded), tokens);
    ASSERT_EQ(a.size(), b.size());
    // GGUF keeps every tensor as it was: the same bits. The HF folder stores Q/K rows in NeoX
    // order (RoPE pairs as halves), so attention sums the same products in another order.
    const float tolerance = c.gguf ? 0.0f : 1e-4f;
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], tolerance) << prune_method_name(c.o.method) << " " << path << " " << i;
    }
    const std::int64_t vocab = m.file.config.vocab_size;
    for (std::size_t row = 0; row < tokens.size(); ++row) {  // greedy text: the same argmax
      const auto first = a.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(vocab));
      const auto other = b.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(vocab));
      ASSERT_EQ(std::max_element(first, first + vocab) - first, std::max_element(other, other + vocab) - other) << row;
    }
  }
}

TEST(PruneModel, BadRequestsGiveOneClearError) {
  const RealModel m = test::load_real_model("stories260K/stories260K.bin");
  const auto expect_error = [&](const PruneOptions& o, const std::string& needle) {
    auto p = pruned(m, o);
    ASSERT_FALSE(p.has_value()) << needle;
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
  };
  expect_error(options(PruneMethod::kMagnitude, {1.0}), "outside (0, 1)");
  expect_error(options(PruneMethod::kWanda, {0.0}), "outside (0, 1)");
  expect_error(options(PruneMethod::kMagnitude, {0.0, 4, 4}), "N must be below M");
  PruneOptions long_calib = options(PruneMethod::kWanda, {0.5});
  long_calib.calib_tokens = 100000;
  expect_error(long_calib, "fewer than --calib-tokens 100000");
  PruneOptions no_text = options(PruneMethod::kSparseGpt, {0.5});
  no_text.calib_path.clear();
  expect_error(no_text, "needs calibration text");
  PruneOptions all_layers = options(PruneMethod::kLayerDrop);
  all_layers.drop_layers = m.file.config.n_layers;
  expect_error(all_layers, "must leave at least one");
  PruneOptions no_width = options(PruneMethod::kWidth);
  no_width.ffn_keep = 0.0;
  expect_error(no_width, "--ffn-keep must be in (0, 1]");
  expect_error(options(PruneMethod::kWidth, {}, 4), "--quantize applies to magnitude, wanda and sparsegpt");

  QuantizeOptions q;
  q.gguf_formats = true;
  q.group = 32;
  q.bits = 8;
  ThreadPool pool(2);
  auto quantized = quantize_model(m.file, nullptr, q, pool);
  ASSERT_TRUE(quantized.has_value()) << quantized.status().message();
  auto p = prune_model(*quantized, m.tok.get(), options(PruneMethod::kMagnitude, {0.5}), pool);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.status().message().find("is already q8_0 (prune the F32/F16/BF16 original"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace peregrine

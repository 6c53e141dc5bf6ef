// LoRA applied unmerged in LlamaModel::forward (model/lora_set.h) on stories260K: the logits equal
// the merged model's (W + s·B·A, in f32) within 1e-4; a batch mixing an adapter's rows with the
// base's and another adapter's gives each row what it gets alone; on a Q8_0 base the adapter
// moves the logits as it does in f32; bad slots are errors; LoraSet::apply (threaded, rows
// grouped by slot, F32 / F16 / BF16 products) equals its scalar reference twin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "peregrine/model/lora_set.h"
#include "peregrine/quant/convert_model.h"
#include "peregrine/quant/float_model.h"
#include "test_models.h"

namespace peregrine {
namespace {

const std::vector<std::string> kAll = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
const std::vector<std::int32_t> kPrompt = {1, 403, 407, 261, 378, 275, 262, 291, 346, 270};

std::unique_ptr<LlamaModel> model_of(ModelFile file) {
  auto m = LlamaModel::create(std::move(file));
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::make_unique<LlamaModel>(std::move(*m)) : nullptr;
}

/// Logits [rows, vocab] of one sequence per entry of `slots` (each the prompt), in one batch.
std::vector<float> logits_of(const LlamaModel& m, const std::vector<std::int32_t>& slots, const LoraSet* lora, ThreadPool& pool) {
  KvCache cache = test::make_kv_cache(m.config(), static_cast<std::int64_t>(kPrompt.size()), static_cast<std::int32_t>(slots.size()));
  Batch batch;
  for (std::size_t s = 0; s < slots.size(); ++s) {
    for (std::size_t i = 0; i < kPrompt.size(); ++i) {
      batch.add(kPrompt[i], static_cast<std::int32_t>(i), static_cast<std::int32_t>(s), true);
      if (lora != nullptr) batch.lora_slots.push_back(slots[s]);
    }
  }
  std::vector<float> logits;
  const Status st = m.forward(batch, cache, logits, pool, 0, nullptr, lora);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return logits;
}

/// `base` with s · user_scale · B·A added to every adapted weight, as an f32 model.
std::unique_ptr<LlamaModel> merged(const ModelFile& base, const LoraAdapter& a, float user_scale) {
  auto f = FloatModel::from(base);
  EXPECT_TRUE(f);
  for (const auto& [name, p] : a.tensors) {
    std::span<float> w = f->tensor(name);
    for (std::int64_t o = 0; o < p.out; ++o) {
      for (std::int64_t i = 0; i < p.in; ++i) {
        double d = 0;
        for (std::int64_t r = 0; r < p.rank; ++r) d += static_cast<double>(p.b[o * p.rank + r]) * p.a[r * p.in + i];
        w[o * p.in + i] += static_cast<float>(user_scale * a.scale() * d);
      }
    }
  }
  return model_of(f->view());
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(LoraForward, UnmergedEqualsMergedAndMixedBatchesKeepEachRows) {
  ThreadPool pool(2);
  auto base = test::load_stories260k();
  ASSERT_TRUE(base);
  auto a = std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 4, 8.0f, 1, kAll));
  auto b = std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 8, 8.0f, 2, {"attn_q", "attn_v"}));
  b->rslora = true;
  LoraSet set;
  ASSERT_EQ(*set.add_slot({{a, 1.0f}}), 0);
  ASSERT_EQ(*set.add_slot({{b, 0.5f}}), 1);
  ASSERT_EQ(*set.add_slot({{a, 1.0f}, {b, 0.5f}}), 2);  // two adapters at once

  const std::vector<float> plain = logits_of(*base, {-1}, nullptr, pool);
  const std::vector<float> with_a = logits_of(*base, {0}, &set, pool);
  const std::vector<float> merged_a = logits_of(*merged(base->file(), *a, 1.0f), {-1}, nullptr, pool);
  EXPECT_LT(max_abs_diff(with_a, merged_a), 1e-4);
  EXPECT_GT(max_abs_diff(with_a, plain), 1e-2);  // the adapter matters

  auto both = FloatModel::from(merged(base->file(), *a, 1.0f)->file());
  ASSERT_TRUE(both);
  const std::vector<float> with_ab = logits_of(*base, {2}, &set, pool);
  const std::vector<float> merged_ab = logits_of(*merged(both->view(), *b, 0.5f), {-1}, nullptr, pool);
  EXPECT_LT(max_abs_diff(with_ab, merged_ab), 1e-4);

  // One batch: adapter a, the base, adapter b, both; each sequence's rows as when alone, up to
  // what the base model alone shows between a 10-row and a 40-row batch (the GEMM's tiling).
  const std::vector<float> mixed = logits_of(*base, {0, -1, 1, 2}, &set, pool);
  const std::size_t rows = kPrompt.size() * static_cast<std::size_t>(base->config().vocab_size);
  const std::vector<float> four_plain = logits_of(*base, {-1, -1, -1, -1}, nullptr, pool);
  double batching = 0;
  for (std::size_t s = 0; s < 4; ++s) batching = std::max(batching, max_abs_diff(std::span(four_plain).subspan(s * rows, rows), plain));
  const double bound = 2 * batching + 1e-6;
  const std::vector<float> with_b = logits_of(*base, {1}, &set, pool);
  EXPECT_LT(max_abs_diff(std::span(mixed).subspan(0, rows), with_a), bound) << "batching alone: " << batching;
  EXPECT_LT(max_abs_diff(std::span(mixed).subspan(rows, rows), plain), bound);
  EXPECT_LT(max_abs_diff(std::span(mixed).subspan(2 * rows, rows), with_b), bound);
  EXPECT_LT(max_abs_diff(std::span(mixed).subspan(3 * rows, rows), with_ab), bound);
  EXPECT_GT(max_abs_diff(with_b, plain), 100 * bound);  // the rows really differ by adapter
}

TEST(LoraForward, AdaptersApplyOnAQuantizedBase) {
  ThreadPool pool(2);
  auto base = test::load_stories260k();
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(base && file);
  ASSERT_TRUE(convert_model_weights(*file, DType::kQ8_0, nullptr));
  auto q8 = model_of(std::move(*file));
  ASSERT_TRUE(q8);
  auto a = std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 4, 8.0f, 1, kAll));
  LoraSet set;
  ASSERT_TRUE(set.add_slot({{a, 1.0f}}));
  // The adapter's effect on the Q8_0 base is its effect on the f32 base, up to Q8_0's rounding.
  const std::vector<float> f32_delta_base = logits_of(*base, {-1}, nullptr, pool), q8_base = logits_of(*q8, {-1}, nullptr, pool);
  const std::vector<float> merged_f32 = logits_of(*merged(base->file(), *a, 1.0f), {-1}, nullptr, pool);
  const std::vector<float> q8_lora = logits_of(*q8, {0}, &set, pool);
  const double rounding = max_abs_diff(q8_base, f32_delta_base);
  EXPECT_LT(max_abs_diff(q8_lora, merged_f32), 3 * rounding + 1e-4) << "Q8_0 rounding alone: " << rounding;
  EXPECT_GT(max_abs_diff(q8_lora, q8_base), 10 * rounding);
}

TEST(LoraForward, BadSlotsAreErrors) {
  ThreadPool pool(1);
  auto base = test::load_stories260k();
  ASSERT_TRUE(base);
  LoraSet set;
  EXPECT_FALSE(set.add_slot({}));
  EXPECT_FALSE(set.add_slot({{nullptr, 1.0f}}));
  ASSERT_TRUE(set.add_slot({{std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 2, 4.0f, 3, {"attn_q"})), 1.0f}}));
  KvCache cache = test::make_kv_cache(base->config(), 4);
  std::vector<float> logits;
  Batch batch;
  batch.add(1, 0, 0, true);
  batch.add(403, 1, 0, true);
  batch.lora_slots = {0};  // one slot for two rows
  EXPECT_EQ(base->forward(batch, cache, logits, pool, 0, nullptr, &set).code(), ErrorCode::kInvalidArgument);
  batch.lora_slots = {0, 1};  // no slot 1
  EXPECT_EQ(base->forward(batch, cache, logits, pool, 0, nullptr, &set).code(), ErrorCode::kInvalidArgument);
  batch.lora_slots = {0, 0};
  EXPECT_EQ(base->forward(batch, cache, logits, pool).code(), ErrorCode::kInvalidArgument);  // slots without a LoraSet
}

// Over 700 rows of four slots and the base, interleaved (each slot's rows gathered) and then in
// runs (contiguous, read in place), with a slot of two adapters, over the calls a forward makes
// (Q/K/V and gate/up in one call each): enough multiply-adds for the threaded path. apply's f32
// sums differ from the reference's f64 ones by rounding only.
TEST(LoraForward, ApplyEqualsItsReferenceTwinInEveryProductDtype) {
  ThreadPool pool(2);
  auto base = test::load_stories260k();
  ASSERT_TRUE(base);
  auto a = std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 4, 8.0f, 1, kAll));
  auto b = std::make_shared<LoraAdapter>(test::random_lora_adapter(base->file(), 8, 8.0f, 2, {"ffn_down", "ffn_up"}));
  const std::int64_t n = 700;
  std::vector<std::int32_t> interleaved(n), runs(n);
  for (std::int64_t i = 0; i < n; ++i) {
    interleaved[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 5) - 1;
    runs[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 5 / n) - 1;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    LoraSet set(dtype);
    EXPECT_EQ(set.product_dtype(), dtype);
    ASSERT_TRUE(set.add_slot({{a, 1.0f}}));
    ASSERT_TRUE(set.add_slot({{b, 0.5f}}));
    ASSERT_TRUE(set.add_slot({{a, 1.0f}, {b, -2.0f}}));
    ASSERT_TRUE(set.add_slot({{a, 0.25f}}));
    // The calls a forward makes: weights sharing one input in one call (slot 1's adapter has
    // up but not gate).
    const std::vector<std::vector<const char*>> calls = {{"ffn_down"}, {"ffn_gate", "ffn_up"}, {"attn_q", "attn_k", "attn_v"}};
    for (const std::vector<const char*>& call : calls) {
      const TensorView* first = base->file().find(layer_tensor_name(1, call[0]));
      ASSERT_NE(first, nullptr);
      std::vector<float> x(static_cast<std::size_t>(n * first->shape[1]));
      for (float& v : x) v = normal(rng);
      std::vector<std::vector<float>> y0;
      for (const char* weight : call) {
        y0.emplace_back(static_cast<std::size_t>(n * base->file().find(layer_tensor_name(1, weight))->shape[0]));
        for (float& v : y0.back()) v = normal(rng);
      }
      for (const auto& slots : {interleaved, runs}) {
        std::vector<std::vector<float>> y = y0;
        std::vector<LoraTarget> targets;
        for (std::size_t j = 0; j < call.size(); ++j) targets.push_back({layer_tensor_name(1, call[j]), y[j]});
        set.apply(targets, x, n, slots, pool);
        for (std::size_t j = 0; j < call.size(); ++j) {
          std::vector<float> ref = y0[j];
          set.apply_reference(targets[j].name, x, n, ref, slots);
          EXPECT_LT(max_abs_diff(y[j], ref), 1e-5) << targets[j].name << " " << dtype_name(dtype);
          EXPECT_GT(max_abs_diff(y[j], y0[j]), 1e-2) << targets[j].name;  // the adapters apply
        }
      }
    }
  }
  EXPECT_EQ(LoraSet(DType::kQ8_0).product_dtype(), DType::kF32);
  EXPECT_EQ(lora_product_dtype(base->file()), DType::kF32);
}

}  // namespace
}  // namespace peregrine

// Tensor parallelism (model/tensor_parallel.h) in one process, the ranks as threads
// (thread_parallel.h): every manifest model that splits over 2 ranks gives the PyTorch
// reference's logits within the single-process tolerance (prefill of two sequences in one batch,
// which a pipeline runs as two micro-batches, and decode), every rank the
// same bits; stories260K's greedy text over 2 ranks is one process's (llama2.c's and on); the shards hold the slices
// the layout says, and what cannot be split is one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <tuple>

#include "peregrine/engine/generator.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/kernels/cpu/matmul/bf16_activations.h"
#include "peregrine/model/lora_set.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/model/pipeline_parallel.h"
#include "peregrine/model/tensor_parallel.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/quant/int_group.h"
#include "peregrine/quant/sparse_nm.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "parity_cases.h"
#include "test_models.h"
#include "test_paths.h"
#include "thread_parallel.h"

namespace peregrine {
namespace {

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Every manifest case split over tp × pp thread ranks: the reference logits on rank 0, the same
// bits on every rank; at least `min_checked` cases of `min_families` families split.
void check_every_family(int tp, int pp, std::int64_t min_checked, std::size_t min_families) {
  const ScopedBf16Activations exact(Bf16Activations::kF32);  // as the reference multiplies (LogitsParity)
  const int ranks = tp * pp;
  std::int64_t checked = 0;
  std::vector<std::string> families;
  for (const test::Case& c : test::load_cases()) {
    if (!c.lora.empty() || !c.decode_logits.empty()) continue;  // LoRA: check_lora_cases; length-scaled RoPE: LogitsParity
    SCOPED_TRACE(c.name);
    auto file = load_model_file(c.model);
    ASSERT_TRUE(file) << file.status().message();
    const auto n = static_cast<std::int32_t>(c.tokens.size());
    std::vector<std::vector<float>> prefill(static_cast<std::size_t>(ranks)), decode(prefill.size());
    const Status st = test::run_split(*file, tp, pp, [&](int r, const LlamaModel& model) {
      ThreadPool pool(1);
      // The tokens twice, as sequences 0 and 1: a pipeline cuts them into one micro-batch each.
      KvCache cache = test::make_kv_cache(model.config(), n, 2);
      Batch batch;
      for (std::int32_t seq : {0, 1}) {
        for (std::int32_t i = 0; i < n; ++i) batch.add(c.tokens[i], i, seq, true);
      }
      EXPECT_TRUE(model.forward(batch, cache, prefill[static_cast<std::size_t>(r)], pool).is_ok());
      KvCache decode_cache = test::make_kv_cache(model.config(), n);
      for (std::int32_t i = 0; i < n; ++i) {
        Batch one;
        one.add(c.tokens[i], i, 0, true);
        std::vector<float> logits;
        EXPECT_TRUE(model.forward(one, decode_cache, logits, pool).is_ok());
        decode[static_cast<std::size_t>(r)].insert(decode[static_cast<std::size_t>(r)].end(), logits.begin(), logits.end());
      }
    });
    if (!st) {  // a shape that 2 ranks cannot split: MQA, whole-projection Q/K norms, blocks
      std::printf("[ tp=%d pp=%d ] %-24s not split: %s\n", tp, pp, c.name.c_str(), st.message().c_str());
      EXPECT_TRUE(st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kUnsupported) << st.message();
      continue;
    }
    ASSERT_EQ(prefill[0].size(), 2 * c.logits.size());
    const std::vector<float> seq0(prefill[0].begin(), prefill[0].begin() + static_cast<std::ptrdiff_t>(c.logits.size()));
    const std::vector<float> seq1(prefill[0].begin() + static_cast<std::ptrdiff_t>(c.logits.size()), prefill[0].end());
    std::printf("[ tp=%d pp=%d ] %-24s prefill max|dlogit| %.2e / %.2e  decode max|dlogit| %.2e\n", tp, pp, c.name.c_str(),
                max_abs_diff(seq0, c.logits), max_abs_diff(seq1, c.logits), max_abs_diff(decode[0], c.logits));
    EXPECT_LE(max_abs_diff(seq0, c.logits), 1e-4f);
    EXPECT_LE(max_abs_diff(seq1, c.logits), 1e-4f);
    EXPECT_LE(max_abs_diff(decode[0], c.logits), 1e-4f);
    for (int r = 1; r < ranks; ++r) {  // the all-reduce and the logits broadcast: the same bits everywhere
      EXPECT_EQ(prefill[static_cast<std::size_t>(r)], prefill[0]) << "rank " << r;
      EXPECT_EQ(decode[static_cast<std::size_t>(r)], decode[0]) << "rank " << r;
    }
    ++checked;
    const std::string family = file->config.arch + (file->config.n_experts > 0 ? "-moe" : "");
    if (std::find(families.begin(), families.end(), family) == families.end()) families.push_back(family);
  }
  EXPECT_GE(checked, min_checked);
  std::string seen;
  for (const std::string& f : families) seen += f + " ";
  SCOPED_TRACE(seen);
  EXPECT_GE(families.size(), min_families);
}

// llama, qwen2, qwen3, phi3, gemma2, mixtral / qwen2moe / olmoe (MoE).
TEST(TensorParallel, ShardedLogitsMatchTheReferenceOnEveryFamily) { check_every_family(2, 1, 32, 8); }
TEST(PipelineParallel, StagedLogitsMatchTheReferenceOnEveryFamily) { check_every_family(1, 2, 38, 8); }
TEST(TensorAndPipelineParallel, FourRanksMatchTheReferenceOnEveryFamily) { check_every_family(2, 2, 32, 8); }

// Every manifest case with a LoRA adapter (PEFT folders and llama.cpp GGUFs) over tp × pp thread
// ranks, each rank applying its stage_lora_adapter + shard_lora_adapter part unmerged: the
// PyTorch reference's logits with the adapter, within the single-process tolerance.
void check_lora_cases(int tp, int pp) {
  std::int64_t checked = 0;
  for (const test::Case& c : test::load_cases()) {
    if (c.lora.empty()) continue;
    SCOPED_TRACE(c.name);
    auto file = load_model_file(c.model);
    ASSERT_TRUE(file) << file.status().message();
    auto adapter = load_lora_adapter(c.lora, *file);
    ASSERT_TRUE(adapter) << adapter.status().message();
    std::vector<std::vector<float>> logits(static_cast<std::size_t>(tp * pp));
    const Status st = test::run_split(*file, tp, pp, [&](int r, const LlamaModel& model) {
      const int stage = r / tp;
      auto staged = stage_lora_adapter(*adapter, file->config.n_layers, stage, pp);
      ASSERT_TRUE(staged) << staged.status().message();
      auto part = shard_lora_adapter(*staged, shard_pipeline_stage(*file, stage, pp)->config, r % tp, tp);
      ASSERT_TRUE(part) << part.status().message();
      LoraSet lora;  // f32 products, as the parity test compares them
      ASSERT_TRUE(lora.add_slot({{std::make_shared<const LoraAdapter>(std::move(*part)), 1.0f}}));
      ThreadPool pool(1);
      KvCache cache = test::make_kv_cache(model.config(), static_cast<std::int64_t>(c.tokens.size()));
      Batch batch;
      for (std::size_t i = 0; i < c.tokens.size(); ++i) batch.add(c.tokens[i], static_cast<std::int32_t>(i), 0, true);
      batch.lora_slots.assign(c.tokens.size(), 0);
      EXPECT_TRUE(model.forward(batch, cache, logits[static_cast<std::size_t>(r)], pool, 0, nullptr, &lora).is_ok());
    });
    if (!st) {
      std::printf("[ tp=%d pp=%d ] %-28s not split: %s\n", tp, pp, c.name.c_str(), st.message().c_str());
      continue;
    }
    std::printf("[ tp=%d pp=%d ] %-28s max|dlogit| %.2e\n", tp, pp, c.name.c_str(), max_abs_diff(logits[0], c.logits));
    EXPECT_LE(max_abs_diff(logits[0], c.logits), 1e-4f);
    for (const auto& l : logits) EXPECT_EQ(l, logits[0]);
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(TensorParallel, LoraAdaptersSplitWithTheWeights) { check_lora_cases(2, 1); }
TEST(PipelineParallel, LoraAdaptersFollowTheirLayers) { check_lora_cases(1, 2); }
TEST(TensorAndPipelineParallel, LoraAdaptersSplitOnFourRanks) { check_lora_cases(2, 2); }

// stories260K's greedy text over tp × pp thread ranks: one process's, on every rank.
void check_stories_greedy(int tp, int pp) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  std::vector<std::string> text(static_cast<std::size_t>(tp * pp));
  const Status st = test::run_split(*file, tp, pp, [&](int r, const LlamaModel& model) {
    auto tok = load_tokenizer(model.file());
    ASSERT_TRUE(tok) << tok.status().message();
    ThreadPool pool(1);
    GenerateOptions opt;
    opt.max_new_tokens = 300;
    opt.sampling.temperature = 0.0f;
    const std::string prompt = "Once upon a time";
    const auto ids = (*tok)->encode(prompt, true);
    std::string& out = text[static_cast<std::size_t>(r)];
    out = prompt;
    std::int32_t prev = ids.back();
    auto stats = generate(model, ids, opt, pool, [&](std::int32_t id) {
      out += (*tok)->decode_token(prev, id);
      prev = id;
    });
    ASSERT_TRUE(stats) << stats.status().message();
  });
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(text[0], test::stories260k_greedy_text(DType::kF32));  // one process's 300 tokens
  EXPECT_TRUE(text[0].starts_with(test::stories260k_reference_text()));
  for (const std::string& t : text) EXPECT_EQ(t, text[0]);
}

TEST(TensorParallel, StoriesGreedyTextIsOneProcesss) { check_stories_greedy(2, 1); }
TEST(PipelineParallel, StoriesGreedyTextIsOneProcesss) { check_stories_greedy(1, 2); }
TEST(TensorAndPipelineParallel, StoriesGreedyTextIsOneProcesss) { check_stories_greedy(2, 2); }

TEST(TensorParallel, ShardsHoldTheirSlices) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  const ModelConfig& c = file->config;
  for (int r = 0; r < 2; ++r) {
    auto shard = shard_model_file(*file, r, 2);
    ASSERT_TRUE(shard) << shard.status().message();
    EXPECT_EQ(shard->config.n_heads, c.n_heads / 2);
    EXPECT_EQ(shard->config.n_kv_heads, c.n_kv_heads / 2);
    EXPECT_EQ(shard->config.ffn_dim, c.ffn_dim / 2);
    for (const char* name : {"attn_q", "attn_k", "ffn_up", "attn_output", "ffn_down"}) {
      const TensorView& whole = *file->find(layer_tensor_name(1, name));
      const TensorView& part = *shard->find(layer_tensor_name(1, name));
      const bool rows = std::string(name) != "attn_output" && std::string(name) != "ffn_down";
      const std::int64_t out = whole.shape[0], in = whole.shape[1];
      ASSERT_EQ(part.shape, (rows ? std::vector<std::int64_t>{out / 2, in} : std::vector<std::int64_t>{out, in / 2})) << name;
      std::vector<float> w(static_cast<std::size_t>(whole.numel())), p(static_cast<std::size_t>(part.numel()));
      dequantize(whole.dtype, whole.data, w);
      dequantize(part.dtype, part.data, p);
      for (std::int64_t i = 0; i < part.shape[0]; ++i) {
        for (std::int64_t j = 0; j < part.shape[1]; ++j) {
          const std::int64_t wi = rows ? (r * out / 2 + i) * in + j : i * in + r * in / 2 + j;
          ASSERT_EQ(p[static_cast<std::size_t>(i * part.shape[1] + j)], w[static_cast<std::size_t>(wi)]) << name << " " << i << "," << j;
        }
      }
    }
    EXPECT_EQ(shard->find("token_embd.weight")->data, file->find("token_embd.weight")->data);  // replicated, not copied
  }
}

TEST(PipelineParallel, StagesHoldTheirLayersRenumbered) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->config.n_layers, 5);
  // 5 layers over 2 stages: [0, 2) and [2, 5).
  auto second = shard_pipeline_stage(*file, 1, 2);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(second->config.n_layers, 3);
  EXPECT_EQ(second->config.first_layer, 2);
  EXPECT_EQ(second->find("blk.0.attn_q.weight")->data, file->find("blk.2.attn_q.weight")->data);
  EXPECT_EQ(second->find("blk.3.attn_q.weight"), nullptr);
  EXPECT_EQ(second->find("output_norm.weight")->data, file->find("output_norm.weight")->data);
  EXPECT_FALSE(shard_pipeline_stage(*file, 0, 6));  // more stages than layers
  EXPECT_FALSE(shard_pipeline_stage(*file, 2, 2));
  // Gemma 2's local / global layers keep their place: layer 0 of a stage starting at 3 is global.
  ModelConfig c;
  c.sliding_window = 4;
  c.sliding_window_period = 2;
  c.first_layer = 3;
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 4);
}

// `file` with every linear but those named in `keep` re-encoded by `encode` (f32 in, the new
// dtype, QuantParams and bytes out), owned by the file.
using Encode = std::function<std::tuple<DType, QuantParams, std::vector<std::uint8_t>>(const TensorView&, std::span<const float>)>;
ModelFile with_linears(ModelFile file, const Encode& encode, const std::string& keep = "") {
  for (auto& [name, t] : file.tensors) {
    if (t.shape.size() != 2 || name == "token_embd.weight" || name == "output.weight") continue;
    if (!keep.empty() && name.find(keep) != std::string::npos) continue;
    auto [dtype, quant, bytes] = encode(t, {static_cast<const float*>(t.data), static_cast<std::size_t>(t.numel())});
    auto owned = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
    t = TensorView{t.name, dtype, t.shape, owned->data(), owned->size(), quant};
    file.storage.push_back(std::move(owned));
  }
  return file;
}

// Logits of `tokens` from `file` in one process and over 2 tensor-parallel thread ranks.
void expect_split_logits_match(const ModelFile& file, const std::vector<std::int32_t>& tokens) {
  auto whole = LlamaModel::create(file);
  ASSERT_TRUE(whole) << whole.status().message();
  const auto forward = [&](const LlamaModel& model, std::vector<float>& logits) {
    ThreadPool pool(1);
    KvCache cache = test::make_kv_cache(model.config(), static_cast<std::int64_t>(tokens.size()));
    Batch batch;
    for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
    EXPECT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
  };
  std::vector<float> want;
  forward(*whole, want);
  std::vector<std::vector<float>> got(2);
  const Status st = test::run_split(file, 2, 1, [&](int r, const LlamaModel& model) { forward(model, got[static_cast<std::size_t>(r)]); });
  ASSERT_TRUE(st) << st.message();
  EXPECT_LE(max_abs_diff(got[0], want), 1e-4f);
  EXPECT_EQ(got[1], got[0]);
}

TEST(TensorParallel, IntAndSparseWeightsSplitByColumnsToTheSameLogits) {
  auto file = load_model_file(test::testdata_dir() + "/gguf-f32-gqa.gguf");  // attn_output 64 columns, ffn_down 172
  ASSERT_TRUE(file) << file.status().message();
  const std::vector<std::int32_t> tokens = {1, 45, 300, 7, 99, 12, 480, 3};
  // Group-wise int: 4 bits in groups of 2 (ffn_down's 86-column halves hold whole groups), 3
  // bits asymmetric (86 · 3 bits: a slice that starts inside a byte), 8 bits per channel.
  for (const QuantParams p : {QuantParams{4, 2, false, 16, 0.0f}, QuantParams{3, 2, true, 16, 0.0f}, QuantParams{8, -1, false, 16, 0.0f}}) {
    SCOPED_TRACE(std::to_string(p.bits) + " bits, group " + std::to_string(p.group_size));
    expect_split_logits_match(with_linears(*file, [&](const TensorView& t, std::span<const float> w) {
      QuantParams q = p;
      if (q.group_size < 0) q.group_size = t.shape[1];
      return std::make_tuple(DType::kInt, q, quantize_int_rtn(w, t.shape[0], t.shape[1], q));
    }), tokens);
  }
  // 2:4 sparse F16 (magnitude-pruned; ffn_down's halves of 86 columns are not whole groups of 4,
  // so it stays f32), and the error when a slice would cut a group.
  const Encode sparse = [](const TensorView& t, std::span<const float> w) {
    std::vector<float> pruned(w.begin(), w.end());
    for (std::size_t g = 0; g + 4 <= pruned.size(); g += 4) {  // keep the 2 largest of every 4
      std::array<std::size_t, 4> order = {g, g + 1, g + 2, g + 3};
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::fabs(pruned[a]) > std::fabs(pruned[b]); });
      pruned[order[2]] = pruned[order[3]] = 0.0f;
    }
    auto e = encode_sparse_nm(pruned, t.shape[0], t.shape[1], {2, 4}, SparseBase::kF16);
    EXPECT_TRUE(e) << e.status().message();
    return std::make_tuple(e->dtype, QuantParams{}, std::move(e->bytes));
  };
  expect_split_logits_match(with_linears(*file, sparse, "ffn_down"), tokens);
  auto cut = shard_model_file(with_linears(*file, sparse), 0, 2);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.status().message().find("would split a f16_s24 block of blk.0.ffn_down.weight"), std::string::npos) << cut.status().message();
}

TEST(TensorParallel, WhatCannotBeSplitIsOneClearError) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  auto three = shard_model_file(*file, 0, 3);
  ASSERT_FALSE(three);
  EXPECT_NE(three.status().message().find("divisible by 3"), std::string::npos) << three.status().message();
  EXPECT_FALSE(shard_model_file(*file, 2, 2));
  EXPECT_FALSE(shard_model_file(*file, 0, 0));
}

}  // namespace
}  // namespace peregrine

// Tensor parallelism (model/tensor_parallel.h) in one process, the ranks as threads
// (thread_tensor_parallel.h): every manifest model that splits over 2 ranks gives the PyTorch
// reference's logits within the single-process tolerance (prefill and decode), every rank the
// same bits; stories260K's greedy text over 2 ranks is one process's (llama2.c's and on); the shards hold the slices
// the layout says, and what cannot be split is one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "peregrine/engine/generator.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/model/tensor_parallel.h"
#include "peregrine/quant/dequantize.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "parity_cases.h"
#include "test_models.h"
#include "thread_tensor_parallel.h"

namespace peregrine {
namespace {

// Runs fn(rank, model) on `size` threads, each with rank r's shard of `file` as a model in a
// tensor-parallel thread group; returns the first shard or model error (then nothing ran).
template <class Fn>
Status run_sharded(const ModelFile& file, int size, Fn&& fn) {
  std::vector<ModelFile> shards;
  for (int r = 0; r < size; ++r) {
    PEREGRINE_ASSIGN_OR_RETURN(ModelFile shard, shard_model_file(file, r, size));
    shards.push_back(std::move(shard));
  }
  std::vector<LlamaModel> models;
  const auto groups = test::thread_tensor_parallel_groups(size);
  for (int r = 0; r < size; ++r) {
    PEREGRINE_ASSIGN_OR_RETURN(LlamaModel m, LlamaModel::create(std::move(shards[static_cast<std::size_t>(r)])));
    PEREGRINE_RETURN_IF_ERROR(m.set_tensor_parallel(groups[static_cast<std::size_t>(r)]));
    models.push_back(std::move(m));
  }
  std::vector<std::jthread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, models[static_cast<std::size_t>(r)]); });
  return Status::ok();
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(TensorParallel, ShardedLogitsMatchTheReferenceOnEveryFamily) {
  std::int64_t checked = 0;
  std::vector<std::string> families;
  for (const test::Case& c : test::load_cases()) {
    if (!c.lora.empty() || !c.decode_logits.empty()) continue;  // LoRA is not sliced; length-scaled RoPE: LogitsParity
    SCOPED_TRACE(c.name);
    auto file = load_model_file(c.model);
    ASSERT_TRUE(file) << file.status().message();
    const auto n = static_cast<std::int32_t>(c.tokens.size());
    std::vector<float> prefill[2], decode[2];
    const Status st = run_sharded(*file, 2, [&](int r, const LlamaModel& model) {
      ThreadPool pool(1);
      KvCache cache = test::make_kv_cache(model.config(), n);
      Batch batch;
      for (std::int32_t i = 0; i < n; ++i) batch.add(c.tokens[i], i, 0, true);
      EXPECT_TRUE(model.forward(batch, cache, prefill[r], pool).is_ok());
      KvCache decode_cache = test::make_kv_cache(model.config(), n);
      for (std::int32_t i = 0; i < n; ++i) {
        Batch one;
        one.add(c.tokens[i], i, 0, true);
        std::vector<float> logits;
        EXPECT_TRUE(model.forward(one, decode_cache, logits, pool).is_ok());
        decode[r].insert(decode[r].end(), logits.begin(), logits.end());
      }
    });
    if (!st) {  // a shape that 2 ranks cannot split: MQA, whole-projection Q/K norms, blocks
      std::printf("[ tp=2 ] %-24s not split: %s\n", c.name.c_str(), st.message().c_str());
      EXPECT_TRUE(st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kUnsupported) << st.message();
      continue;
    }
    ASSERT_EQ(prefill[0].size(), c.logits.size());
    std::printf("[ tp=2 ] %-24s prefill max|dlogit| %.2e  decode max|dlogit| %.2e\n", c.name.c_str(),
                max_abs_diff(prefill[0], c.logits), max_abs_diff(decode[0], c.logits));
    EXPECT_LE(max_abs_diff(prefill[0], c.logits), 1e-4f);
    EXPECT_LE(max_abs_diff(decode[0], c.logits), 1e-4f);
    EXPECT_EQ(prefill[0], prefill[1]);  // the all-reduce gives every rank the same bits
    EXPECT_EQ(decode[0], decode[1]);
    ++checked;
    const std::string family = file->config.arch + (file->config.n_experts > 0 ? "-moe" : "");
    if (std::find(families.begin(), families.end(), family) == families.end()) families.push_back(family);
  }
  EXPECT_GE(checked, 15);
  std::string seen;
  for (const std::string& f : families) seen += f + " ";
  SCOPED_TRACE(seen);
  EXPECT_GE(families.size(), 6u);  // llama, qwen2, qwen3, phi3, gemma2, mixtral / qwen2moe
}

TEST(TensorParallel, StoriesGreedyTextOverTwoRanksIsLlama2cs) {
  auto file = load_model_file(test::stories260k_path());
  ASSERT_TRUE(file) << file.status().message();
  std::string text[2];
  const Status st = run_sharded(*file, 2, [&](int r, const LlamaModel& model) {
    auto tok = load_tokenizer(model.file());
    ASSERT_TRUE(tok) << tok.status().message();
    ThreadPool pool(1);
    GenerateOptions opt;
    opt.max_new_tokens = 300;
    opt.sampling.temperature = 0.0f;
    const std::string prompt = "Once upon a time";
    const auto ids = (*tok)->encode(prompt, true);
    text[r] = prompt;
    std::int32_t prev = ids.back();
    auto stats = generate(model, ids, opt, pool, [&](std::int32_t id) {
      text[r] += (*tok)->decode_token(prev, id);
      prev = id;
    });
    ASSERT_TRUE(stats) << stats.status().message();
  });
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(text[0], test::stories260k_greedy_text(DType::kF32));  // one process's 300 tokens
  EXPECT_TRUE(text[0].starts_with(test::stories260k_reference_text()));
  EXPECT_EQ(text[1], text[0]);
}

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

// The real stories260K model, loaded for tests that run forwards on it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/engine/generator.h"
#include "peregrine/spec/eagle_head.h"
#include "peregrine/spec/model_drafter.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/spec/medusa_heads.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::test {

/// ../shared/models/stories260K/stories260K.bin.
std::string stories260k_path();

/// llama.cpp's test vocabulary tokenizers/gguf-vocab/ggml-vocab-NAME.gguf of the shared data,
/// loaded once per process (fails the calling test when it cannot be read).
const Tokenizer& llamacpp_vocab(const std::string& name);

/// Loads stories260K (F32); fails the calling test (gtest ASSERT-style, returns nullptr) if it
/// cannot.
std::unique_ptr<LlamaModel> load_stories260k();

/// Greedy "Once upon a time" + 300 tokens of stories260K (the .bin) with its weight matrices
/// converted to `dtype` (convert_model_weights), its K/V cached in `kv_type`, placed per
/// `placement`, prompt included; fails the calling test (EXPECT) on any error.
std::string stories260k_greedy_text(DType dtype, DType kv_type = DType::kF32,
                                    WeightPlacement placement = WeightPlacement::kHugePages);

/// llama2.c's published greedy continuation of "Once upon a time" (prompt included, without its
/// final newline): models/stories260K/greedy_once_upon_a_time.txt.
std::string stories260k_reference_text();

/// Loads the generated test model `name` (a file or folder of test::testdata_dir()); fails the
/// calling test (gtest ASSERT-style, returns nullptr) if it cannot.
std::unique_ptr<LlamaModel> load_test_model(const std::string& name);

/// A paged KV cache for `config` with room for `n_seqs` sequences of `n_tokens` positions each
/// (blocks of `block_size`, K/V in `dtype`); aborts the test binary if KvCache::create fails.
KvCache make_kv_cache(const ModelConfig& config, std::int64_t n_tokens, std::int32_t n_seqs = 1,
                      std::int32_t block_size = kDefaultKvBlockSize, DType dtype = DType::kF32);

/// Medusa heads for `target` as Medusa-1 training starts them: K heads of one ResBlock each
/// (weights and biases zero, so each head is the target's LM head) and the LM head's rows in
/// f32. Losslessness holds for any heads; what trained heads buy is measured in tests/train
/// and the benchmarks.
MedusaHeads untrained_medusa_heads(const LlamaModel& target, std::int64_t heads);

/// An EAGLE head for `target` (its shape) that passes the feature through untouched: fc = [0 | I]
/// (reads f_p, ignores the token), o_proj and down_proj zero, so f̂_{p+1} = f_p and the head
/// drafts what the target's LM head said one position earlier. Losslessness holds for any
/// head; trained heads are tested in tests/train.
EagleHead identity_eagle_head(const LlamaModel& target);

/// A LoRA adapter for `base` with seeded random A and B (normal, std `stddev`) of rank `rank`
/// on the projections `targets` ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
/// "ffn_up", "ffn_down") of every layer; alpha `alpha` (model/synth_lora.h's synth_lora_adapter,
/// failing the test on its errors). Random weights: for format and arithmetic parity only (no
/// trained adapter exists for the test models).
LoraAdapter random_lora_adapter(const ModelFile& base, std::int64_t rank, float alpha, std::uint32_t seed,
                                const std::vector<std::string>& targets, float stddev = 0.05f);

/// A ModelDrafter running `draft` for a target of config `target` (method kDraft, kLayerSkip or
/// kQuant; its first n_layers layers, 0 = all; a KV pool of kv_blocks blocks), or null after a
/// failed expectation.
std::unique_ptr<ModelDrafter> make_model_drafter(const LlamaModel& draft, const ModelConfig& target, SpecMethod method,
                                                 std::int64_t n_layers = 0, std::int32_t kv_blocks = 512,
                                                 std::int64_t context_window = 0);

/// What generate() emitted for one prompt: its tokens and statistics (a failed expectation on
/// an error).
struct Generated {
  std::vector<std::int32_t> tokens;
  GenerationStats stats;
};
Generated generate_tokens(const LlamaModel& model, std::span<const std::int32_t> prompt, const GenerateOptions& o,
                          ThreadPool& pool);

}  // namespace peregrine::test

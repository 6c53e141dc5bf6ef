// LoRA adapters in the serving engine (EngineOptions::lora, RequestOptions::lora_adapter) on
// stories260K with random-weight adapters: a request's greedy text is the same alone or batched
// with requests of other adapters and of the base, also when fewer adapters fit in memory than
// requests name (loaded on demand, evicted LRU); the adapter changes the text; prefix-cache
// blocks are reused within an adapter only; an adapter the engine lacks is refused, and one
// that fails to load ends its request with the error.
#include <gtest/gtest.h>

#include "peregrine/engine/engine.h"
#include "test_models.h"

namespace peregrine {
namespace {

const std::vector<std::int32_t> kPrompt = {1, 403, 407, 261, 378, 275, 262, 291, 346, 270, 261, 378, 275, 262, 291, 346,
                                           270, 403, 407, 261};

struct Fixture {
  ThreadPool pool{2};
  std::unique_ptr<LlamaModel> model = test::load_stories260k();
  std::unique_ptr<LoraPool> lora;
  std::vector<int> loads;  // per adapter, calls of its loader

  /// Random adapters with seeds 1..n_adapters, at most `max_resident` in memory.
  explicit Fixture(std::int32_t n_adapters = 2, std::int32_t max_resident = 2) {
    const std::vector<std::string> all = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    std::vector<LoraLoader> loaders;
    loads.assign(static_cast<std::size_t>(n_adapters), 0);
    for (std::int32_t k = 0; k < n_adapters; ++k) {
      loaders.push_back([this, k, all]() -> Expected<std::vector<LoraSlotEntry>> {
        ++loads[static_cast<std::size_t>(k)];
        const auto seed = static_cast<std::uint32_t>(k + 1);
        return std::vector<LoraSlotEntry>{
            {std::make_shared<LoraAdapter>(test::random_lora_adapter(model->file(), 4, 8.0f, seed, all, 0.2f)), 1.0f}};
      });
    }
    lora = std::make_unique<LoraPool>(std::move(loaders), max_resident);
  }

  std::unique_ptr<Engine> engine() {
    EngineOptions o;
    o.kv = {64, 16, DType::kF32};
    o.lora = lora.get();
    auto e = Engine::create(*model, o, pool);
    EXPECT_TRUE(e) << e.status().message();
    return e ? std::move(*e) : nullptr;
  }
};

struct Outcome {
  std::vector<std::vector<std::int32_t>> texts;
  std::vector<RequestResult> results;
};

/// Greedy texts (and results) of requests with these adapters, submitted together (or, with
/// `one_by_one`, each run to completion before the next is submitted), on one engine.
Outcome run_requests(Engine& engine, const std::vector<std::int32_t>& adapters, bool one_by_one = false) {
  Outcome out;
  out.texts.resize(adapters.size());
  out.results.resize(adapters.size());
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    RequestOptions r;
    r.prompt = kPrompt;
    r.max_tokens = 40;
    r.sampling.temperature = 0.0f;
    r.lora_adapter = adapters[i];
    EXPECT_TRUE(engine.submit(std::move(r), {[&out, i](const TokenEvent& e) {
                                               out.texts[i].push_back(e.token);
                                               return true;
                                             },
                                             [&out, i](const RequestResult& res) { out.results[i] = res; }}));
    if (one_by_one) while (engine.step()) {}
  }
  while (engine.step()) {}
  return out;
}

std::vector<std::vector<std::int32_t>> run(Engine& engine, const std::vector<std::int32_t>& adapters, bool one_by_one = false) {
  return run_requests(engine, adapters, one_by_one).texts;
}

TEST(LoraEngine, GreedyTextIsTheSameAloneAndMixedWithOtherAdapters) {
  Fixture f;
  ASSERT_TRUE(f.model);
  std::vector<std::vector<std::int32_t>> alone;
  for (std::int32_t adapter : {-1, 0, 1}) alone.push_back(run(*f.engine(), {adapter})[0]);
  EXPECT_NE(alone[0], alone[1]);
  EXPECT_NE(alone[1], alone[2]);
  const auto mixed = run(*f.engine(), {0, -1, 1, 0});
  EXPECT_EQ(mixed[0], alone[1]);
  EXPECT_EQ(mixed[1], alone[0]);
  EXPECT_EQ(mixed[2], alone[2]);
  EXPECT_EQ(mixed[3], alone[1]);
  // The base's prompt blocks are in the prefix cache when the adapters' requests arrive.
  const auto after_base = run(*f.engine(), {-1, 0, 1}, true);
  EXPECT_EQ(after_base[1], alone[1]);
  EXPECT_EQ(after_base[2], alone[2]);
}

TEST(LoraEngine, MoreAdaptersThanFitLoadOnDemandWithTheSameText) {
  Fixture all_resident(3, 3);
  ASSERT_TRUE(all_resident.model);
  std::vector<std::vector<std::int32_t>> alone;
  for (std::int32_t adapter : {0, 1, 2}) alone.push_back(run(*all_resident.engine(), {adapter})[0]);

  Fixture one_slot(3, 1);  // every change of adapter evicts the last one
  const auto mixed = run(*one_slot.engine(), {0, 1, 2, 0, -1, 1});
  EXPECT_EQ(mixed[0], alone[0]);
  EXPECT_EQ(mixed[1], alone[1]);
  EXPECT_EQ(mixed[2], alone[2]);
  EXPECT_EQ(mixed[3], alone[0]);
  EXPECT_EQ(mixed[5], alone[1]);
  // Requests whose adapter finds no slot are passed over, not blocking the queue: the two of
  // adapter 0 and the base's run first, then both of adapter 1, then adapter 2's.
  EXPECT_EQ(one_slot.lora->loads(), 3);
  EXPECT_EQ(one_slot.lora->evictions(), 2);
  EXPECT_EQ(one_slot.loads, (std::vector<int>{1, 1, 1}));
}

TEST(LoraEngine, PrefixCacheBlocksAreSharedWithinAnAdapterOnly) {
  Fixture f;
  ASSERT_TRUE(f.model);
  const auto alone = run(*f.engine(), {1})[0];
  const Outcome r = run_requests(*f.engine(), {0, 0, 1, -1}, true);
  EXPECT_EQ(r.results[0].cached_prompt_tokens, 0);
  EXPECT_EQ(r.results[1].cached_prompt_tokens, 16);  // one full block of the 20-token prompt
  EXPECT_EQ(r.results[2].cached_prompt_tokens, 0);   // adapter 0's blocks are not adapter 1's
  EXPECT_EQ(r.results[3].cached_prompt_tokens, 0);   // nor the base's
  EXPECT_EQ(r.texts[1], r.texts[0]);
  EXPECT_EQ(r.texts[2], alone);
}

TEST(LoraEngine, UnknownAdaptersAreRefused) {
  Fixture f;
  ASSERT_TRUE(f.model);
  auto engine = f.engine();
  RequestOptions r;
  r.prompt = kPrompt;
  r.lora_adapter = 2;
  EXPECT_EQ(engine->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
  r.lora_adapter = -2;
  EXPECT_EQ(engine->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
}

TEST(LoraEngine, AnAdapterThatFailsToLoadEndsItsRequestWithTheError) {
  Fixture f;
  ASSERT_TRUE(f.model);
  std::vector<LoraLoader> loaders{[]() -> Expected<std::vector<LoraSlotEntry>> { return corrupt_file("adapter.safetensors is truncated"); }};
  LoraPool failing(std::move(loaders), 1);
  EngineOptions o;
  o.kv = {64, 16, DType::kF32};
  o.lora = &failing;
  auto engine = Engine::create(*f.model, o, f.pool);
  ASSERT_TRUE(engine);
  const Outcome r = run_requests(**engine, {0, -1});
  EXPECT_EQ(r.results[0].reason, FinishReason::kError);
  EXPECT_NE(r.results[0].error.message().find("truncated"), std::string::npos);
  EXPECT_EQ(r.results[1].reason, FinishReason::kLength);  // the base request behind it still runs
  EXPECT_EQ(r.texts[1].size(), 40u);
}

}  // namespace
}  // namespace peregrine

// LoRA adapters in the serving engine (EngineOptions::lora, RequestOptions::lora_slot) on
// stories260K with random-weight adapters: a request's greedy text is the same alone or batched
// with requests of other adapters and of the base, the adapter changes the text, an adapter's
// request does not reuse the base's prefix-cache blocks, and a slot the engine lacks is refused.
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
  LoraSet lora;
  Fixture() {
    const std::vector<std::string> all = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (std::uint32_t seed : {1u, 2u}) {
      auto a = std::make_shared<LoraAdapter>(test::random_lora_adapter(model->file(), 4, 8.0f, seed, all, 0.2f));
      EXPECT_TRUE(lora.add_slot({{a, 1.0f}}));
    }
  }

  std::unique_ptr<Engine> engine() {
    EngineOptions o;
    o.kv = {64, 16, DType::kF32};
    o.lora = &lora;
    auto e = Engine::create(*model, o, pool);
    EXPECT_TRUE(e) << e.status().message();
    return e ? std::move(*e) : nullptr;
  }
};

/// Greedy texts of requests with these slots, submitted together (or, with `one_by_one`, each
/// run to completion before the next is submitted), on one engine.
std::vector<std::vector<std::int32_t>> run(Engine& engine, const std::vector<std::int32_t>& slots, bool one_by_one = false) {
  std::vector<std::vector<std::int32_t>> out(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    RequestOptions r;
    r.prompt = kPrompt;
    r.max_tokens = 40;
    r.sampling.temperature = 0.0f;
    r.lora_slot = slots[i];
    EXPECT_TRUE(engine.submit(std::move(r), {[&out, i](const TokenEvent& e) {
                                               out[i].push_back(e.token);
                                               return true;
                                             },
                                             {}}));
    if (one_by_one) while (engine.step()) {}
  }
  while (engine.step()) {}
  return out;
}

TEST(LoraEngine, GreedyTextIsTheSameAloneAndMixedWithOtherAdapters) {
  Fixture f;
  ASSERT_TRUE(f.model);
  std::vector<std::vector<std::int32_t>> alone;
  for (std::int32_t slot : {-1, 0, 1}) alone.push_back(run(*f.engine(), {slot})[0]);
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

TEST(LoraEngine, UnknownSlotsAreRefused) {
  Fixture f;
  ASSERT_TRUE(f.model);
  auto engine = f.engine();
  RequestOptions r;
  r.prompt = kPrompt;
  r.lora_slot = 2;
  EXPECT_EQ(engine->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
  r.lora_slot = -2;
  EXPECT_EQ(engine->submit(r, {}).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace peregrine
